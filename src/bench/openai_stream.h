// The OpenAI-compatible side of `kite bench serve`: the streaming request body, and the
// recorder that turns a streamed response (SSE events with their arrival times) into one
// request's measurements.
//
// Counting method (what docs/BENCHMARKS.md calls "streamed chunks + usage"):
//  * A "content chunk" is a data event whose first choice carries generated output:
//      completions: choices[0].text non-empty, or empty text on a chunk without finish_reason
//                   (a token whose bytes the detokenizer still holds back);
//      chat:        delta.content / delta.reasoning_content non-empty, or an empty content
//                   on a chunk that is neither the role announcement nor the finish chunk.
//    Chunks with no choices (the include_usage chunk), the role-only first chat chunk and an
//    empty finish chunk are not content.
//  * TTFT is the arrival of the first content chunk; ITL is every gap between consecutive
//    content chunks (a chunk carrying several tokens gives one gap, as in vLLM).
//  * Output tokens = usage.completion_tokens from the final chunk (stream_options.
//    include_usage), falling back to the number of content chunks when the server sends no
//    usage; prompt tokens = usage.prompt_tokens, else the dataset's input_len.
//  * TPOT = (E2E - TTFT) / (output_tokens - 1), defined for output_tokens >= 2.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/dataset.h"
#include "bench/sse_parser.h"
#include "core/status.h"

namespace kite::bench {

enum class Endpoint { kCompletions, kChat };

Result<Endpoint> parse_endpoint(const std::string& name);
// "/v1/completions" or "/v1/chat/completions".
const char* endpoint_path(Endpoint endpoint);

// stream: true with usage, ignore_eos and max_tokens = output_len so the output length is
// controlled, temperature 0. A token-id prompt on the chat endpoint is an error.
Result<nlohmann::json> make_request_body(const BenchRequest& request, Endpoint endpoint,
                                         const std::string& model);

// One request's measurements (times in seconds).
struct RequestResult {
  bool success = false;
  std::string error;
  double send_s = 0;  // when it was sent, from the start of the run
  double ttft_s = 0;
  double e2e_s = 0;
  std::vector<double> itl_s;
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  int32_t num_content_chunks = 0;
  bool usage_reported = false;

  // (e2e - ttft) / (output_tokens - 1); 0 when output_tokens < 2.
  double tpot_s() const;
};

class StreamRecorder {
 public:
  explicit StreamRecorder(Endpoint endpoint) : endpoint_(endpoint) {}

  // `t_s`: seconds since the request was sent.
  void on_event(const SseEvent& event, double t_s);
  bool saw_done() const { return done_s_ >= 0; }
  // The outcome: `transport` is the HTTP client's status (connection errors, non-200
  // replies); `end_s` when the response ended.
  RequestResult finish(const BenchRequest& request, const Status& transport, double end_s) const;

 private:
  bool is_content(const nlohmann::json& choice) const;

  Endpoint endpoint_;
  std::vector<double> chunk_s_;
  double done_s_ = -1;
  int32_t usage_prompt_ = -1, usage_completion_ = -1;
  std::string error_;
};

}  // namespace kite::bench
