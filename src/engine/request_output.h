// What the engine streams back for a request: one RequestOutput per step that produced a
// token or ended the request. Text is incremental, UTF-8-complete and has stop strings removed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace kite {

// A request as the engine takes it: token ids already (the server or CLI renders templates
// and tokenizes), one sequence (n > 1 is fanned out by the caller).
struct EngineRequest {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  int32_t priority = 0;  // lower first
};

struct TokenLogprobs {
  int32_t token_id = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;  // sorted, best first
};

struct RequestOutput {
  std::string request_id;
  std::vector<int32_t> new_token_ids;   // tokens this event adds
  std::string text_delta;               // their text (may be empty while bytes are held back)
  std::vector<TokenLogprobs> logprobs;  // per new token, when requested
  // Set on the last event: "stop" | "length" | "abort" | "error".
  std::optional<std::string> finish_reason;
  std::optional<std::string> stop_reason;  // the matched stop string, if any
  std::string error_message;               // with finish_reason "error"
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;  // so far
  int32_t num_cached_tokens = 0;  // prompt tokens served from the prefix cache

  bool finished() const { return finish_reason.has_value(); }
};

// Called on the engine thread, in order, for every event of one request. Must not block:
// hand the event to another thread (a queue, an io_context) and return.
using OutputCallback = std::function<void(const RequestOutput&)>;

}  // namespace kite
