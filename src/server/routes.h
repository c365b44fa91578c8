// Router: maps an HttpRequest to its endpoint and answers it. It holds no model state: it
// talks to the Engine (add_request / abort / stats / tokenizer) through GenerationJobs and to
// the PromptRenderer for chat templates.
//
//   GET  /health               200 when ready, 503 while draining
//   GET  /metrics              Prometheus text format
//   GET  /v1/models            the served model
//   POST /v1/chat/completions  chat (stream or not)
//   POST /v1/completions       completions (stream or not)
//   POST /tokenize             {prompt} | {messages} -> {tokens, count, max_model_len}
//   POST /detokenize           {tokens} -> {prompt}
//
// With an API key set, /v1/*, /tokenize and /detokenize need `Authorization: Bearer <key>`;
// /health and /metrics stay open for probes and scrapers. Thread-safe: every io thread calls
// handle() concurrently.
#pragma once

#include <atomic>
#include <string>

#include "engine/engine.h"
#include "server/http_types.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "tokenizer/prompt_renderer.h"

namespace kite::server {

struct RouterConfig {
  std::string served_model_name;  // what /v1/models lists and requests must name
  std::string api_key;            // empty: no authentication
  RequestLimits limits;
  // A prompt (text, or the chat messages' contents together) longer than this many bytes is
  // refused with 400 before it is tokenized, so a huge prompt costs no tokenizer time on an
  // io thread. 0: derived from the model, as the bytes max_model_len tokens can cover at
  // most (x3 when the tokenizer NFC-normalizes), so no prompt that would fit is refused.
  size_t max_prompt_bytes = 0;
};

class Router {
 public:
  Router(RouterConfig config, Engine* engine, const PromptRenderer* renderer);

  // `post` runs a function on the calling connection's strand (used by generation jobs).
  Reply handle(const HttpRequest& request, const Poster& post);

  // From now on generation requests get 503 and /health reports 503.
  void begin_draining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  // The HTTP layer's count of requests being served, shown on /metrics.
  void set_in_flight_counter(const std::atomic<int64_t>* counter) { in_flight_ = counter; }
  Metrics& metrics() { return metrics_; }

 private:
  Reply generate(ApiKind kind, const HttpRequest& request, const Poster& post);
  std::optional<ApiError> check_prompt_size(const GenerationRequest& g) const;
  HttpResponse tokenize(const HttpRequest& request) const;
  HttpResponse detokenize(const HttpRequest& request) const;
  HttpResponse models() const;
  HttpResponse web_page() const;  // GET /: the chat + engine page (src/server/web/index.html)
  HttpResponse health() const;
  HttpResponse metrics_text() const;
  std::string new_id(const char* prefix);

  RouterConfig config_;
  Engine* engine_;
  const PromptRenderer* renderer_;
  Metrics metrics_;
  std::atomic<bool> draining_{false};
  const std::atomic<int64_t>* in_flight_ = nullptr;
  int64_t started_at_ = 0;  // unix seconds, /v1/models "created"
  std::atomic<uint64_t> next_id_{0};
  uint64_t id_salt_ = 0;
};

}  // namespace kite::server
