// GenerationJob: one HTTP generation request (chat or completions) in flight — its n x prompts
// engine requests ("choices") and the response bytes they produce.
//
// Threading: the job belongs to one connection. Engine callbacks (engine thread) do nothing but
// post the RequestOutput to that connection's strand through the Poster; every other method
// runs on the strand too, so the job needs no lock. The HTTP layer sets a waker, which the job
// calls (on the strand) whenever new bytes are ready or the job is done.
//
// Output: streaming jobs queue SSE events (take_pending) and end with "data: [DONE]";
// non-streaming jobs build the whole response once every choice has finished (final_response).
// A job whose client went away is cancel()ed: its unfinished engine requests are aborted so
// their KV blocks return to the pool at the engine's next step.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/http_types.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace kite::server {

struct JobConfig {
  ApiKind kind = ApiKind::kChat;
  std::string id;  // response id; engine request ids are "<id>-<choice index>"
  std::string model;
  int64_t created = 0;
  bool stream = false;
  bool include_usage = false;
  int32_t n = 1;  // choices per prompt; choice index = prompt index * n + i
  std::chrono::steady_clock::time_point arrival;
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  GenerationJob(JobConfig config, Engine* engine, Metrics* metrics);

  // Submits n engine requests per prompt (seed + i for choice i when a seed is set). If the
  // engine refuses one, the ones already submitted are aborted and the error is returned.
  std::optional<ApiError> start(const std::vector<std::vector<int32_t>>& prompts,
                                const SamplingParams& sampling, int32_t priority, Poster post);

  bool streaming() const { return config_.stream; }
  // True once every choice has finished and the last bytes (streaming) are queued.
  bool done() const { return done_; }
  // SSE bytes produced since the last call (streaming jobs).
  std::string take_pending() { return std::move(pending_); }
  bool has_pending() const { return !pending_.empty(); }
  // The complete response of a non-streaming job; valid once done().
  HttpResponse final_response() const;
  // The client disconnected: abort every unfinished choice.
  void cancel();
  void set_waker(std::function<void()> waker) { waker_ = std::move(waker); }

 private:
  struct Choice {
    std::string request_id;
    int32_t prompt_index = 0;
    std::string text;                     // non-streaming: the whole text
    std::vector<TokenLogprobs> logprobs;  // non-streaming: every token's
    int64_t text_chars = 0;               // completions text_offset position
    std::optional<std::string> finish_reason;
    std::string error_message;
    int32_t num_prompt_tokens = 0;
    int32_t num_output_tokens = 0;
    int32_t num_cached_tokens = 0;
    bool sent_role = false;  // chat streaming: the first chunk carries the role
    std::optional<std::chrono::steady_clock::time_point> last_token_time;
  };

  void on_output(size_t index, const RequestOutput& out);
  void record_metrics(Choice& c, const RequestOutput& out);
  void stream_event(size_t index, const RequestOutput& out);
  Json stream_choice(size_t index, const RequestOutput& out);
  void finish_stream();
  Usage usage() const;

  JobConfig config_;
  Engine* engine_;
  Metrics* metrics_;
  std::vector<Choice> choices_;
  size_t num_finished_ = 0;
  bool done_ = false;
  bool cancelled_ = false;
  bool start_failed_ = false;  // the engine refused a choice: the job answered with an error
  bool logprobs_ = false;
  std::string pending_;
  std::function<void()> waker_;
};

}  // namespace kite::server
