// Endpoint dispatch, auth, and the request -> engine path; see routes.h.
#include "server/routes.h"

#include "server/web_page.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "server/api_error.h"
#include "server/auth.h"
#include "server/generation_job.h"
#include "server/openai_response.h"

namespace kite::server {
namespace {

HttpResponse json_response(const Json& body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// splitmix64: turns a counter into well-spread bits for response ids.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Route {
  const char* path;
  const char* method;
  bool needs_auth;
};
constexpr Route kRoutes[] = {
    {"/", "GET", false},  // the web page asks for the API key itself, then sends it
    {"/health", "GET", false},         {"/metrics", "GET", false},
    {"/v1/models", "GET", true},       {"/v1/chat/completions", "POST", true},
    {"/v1/completions", "POST", true}, {"/tokenize", "POST", true},
    {"/detokenize", "POST", true},
};

}  // namespace

Router::Router(RouterConfig config, Engine* engine, const PromptRenderer* renderer)
    : config_(std::move(config)),
      engine_(engine),
      renderer_(renderer),
      started_at_(unix_seconds()) {
  id_salt_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  if (config_.max_prompt_bytes == 0 && engine_) {
    // Byte-level BPE: the tokens of a text cover exactly its (normalized) bytes, so a text
    // longer than max_model_len x the longest token cannot fit. NFC composition shrinks text
    // at most 3x (Hangul jamo L+V+T, 9 bytes -> one 3-byte syllable); invalid UTF-8 only
    // grows (U+FFFD), and a chat template only adds text.
    const Tokenizer& tok = engine_->tokenizer();
    size_t longest = 1;
    for (int32_t id = 0; id < tok.vocab_size(); ++id)
      longest = std::max(longest, tok.token_bytes(id).size());
    // Whether the tokenizer normalizes: NFC composes "e" + U+0301 into U+00E9.
    const std::string decomposed = "e\xCC\x81";
    const bool nfc = tok.decode(tok.encode(decomposed, false), false) != decomposed;
    config_.max_prompt_bytes =
        (nfc ? 3 : 1) * longest * static_cast<size_t>(engine_->max_model_len());
  }
}

std::optional<ApiError> Router::check_prompt_size(const GenerationRequest& g) const {
  size_t bytes = 0;
  if (g.kind == ApiKind::kChat) {
    for (const Json& m : g.messages)
      if (auto c = m.find("content"); c != m.end() && c->is_string())
        bytes += c->get_ref<const std::string&>().size();
  } else {
    for (const PromptInput& in : g.prompts) bytes = std::max(bytes, in.text ? in.text->size() : 0);
  }
  if (bytes <= config_.max_prompt_bytes) return std::nullopt;
  ApiError e =
      bad_request("The prompt has " + std::to_string(bytes) + " bytes, more than the " +
                      std::to_string(engine_->max_model_len()) + "-token context can hold (limit " +
                      std::to_string(config_.max_prompt_bytes) + " bytes)",
                  g.kind == ApiKind::kChat ? "messages" : "prompt");
  e.code = "context_length_exceeded";
  return e;
}

std::string Router::new_id(const char* prefix) {
  const uint64_t k = next_id_.fetch_add(1);
  return fmt::format("{}{:016x}{:08x}", prefix, mix(id_salt_ ^ k), static_cast<uint32_t>(k));
}

Reply Router::handle(const HttpRequest& req, const Poster& post) {
  const Route* route = nullptr;
  for (const Route& r : kRoutes)
    if (req.path == r.path) route = &r;
  if (!route) return {route_not_found(req.method, req.path).to_response(), nullptr};
  if (req.method != route->method) {
    HttpResponse r = method_not_allowed(req.method, req.path, route->method).to_response();
    r.headers.emplace_back("Allow", route->method);
    return {std::move(r), nullptr};
  }
  if (route->needs_auth && !authorized(req.authorization, config_.api_key)) {
    HttpResponse r = unauthorized().to_response();
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return {std::move(r), nullptr};
  }
  const std::string_view p = req.path;
  if (p == "/") return {web_page(), nullptr};
  if (p == "/health") return {health(), nullptr};
  if (p == "/metrics") return {metrics_text(), nullptr};
  if (p == "/v1/models") return {models(), nullptr};
  if (p == "/tokenize") return {tokenize(req), nullptr};
  if (p == "/detokenize") return {detokenize(req), nullptr};
  return generate(p == "/v1/chat/completions" ? ApiKind::kChat : ApiKind::kCompletion, req, post);
}

Reply Router::generate(ApiKind kind, const HttpRequest& req, const Poster& post) {
  auto fail = [&](const ApiError& e, FailureReason reason) {
    metrics_.record_failure(reason);
    return Reply{e.to_response(), nullptr};
  };
  const auto arrival = std::chrono::steady_clock::now();
  GenerationRequest g;
  if (auto e = parse_generation_request(kind, req.body, &g, config_.limits))
    return fail(*e, FailureReason::kBadRequest);
  if (auto e = check_prompt_size(g)) return fail(*e, FailureReason::kBadRequest);
  if (g.model && *g.model != config_.served_model_name)
    return fail(model_not_found(*g.model), FailureReason::kBadRequest);
  if (draining())
    return fail(service_unavailable("the server is shutting down"), FailureReason::kUnavailable);

  std::vector<std::vector<int32_t>> prompts;
  if (kind == ApiKind::kChat) {
    auto ids = renderer_->encode_chat(g.messages, g.template_extra);
    if (!ids.ok())
      return fail(bad_request(ids.status().message(), "messages"), FailureReason::kBadRequest);
    prompts.push_back(std::move(*ids));
  } else {
    for (PromptInput& in : g.prompts)
      prompts.push_back(in.text ? renderer_->encode_text(*in.text) : std::move(in.token_ids));
  }
  JobConfig jc;
  jc.kind = kind;
  jc.id = new_id(kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-");
  jc.model = config_.served_model_name;
  jc.created = unix_seconds();
  jc.stream = g.stream;
  jc.include_usage = g.include_usage;
  jc.n = g.n;
  jc.arrival = arrival;
  auto job = std::make_shared<GenerationJob>(std::move(jc), engine_, &metrics_);
  if (auto e = job->start(prompts, g.sampling, g.priority, post))
    return Reply{e->to_response(), nullptr};
  return Reply{{}, std::move(job)};
}

HttpResponse Router::tokenize(const HttpRequest& req) const {
  Json j = Json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return bad_request("The request body must be a JSON object").to_response();
  if (auto m = j.find("model"); m != j.end() && m->is_string() && *m != config_.served_model_name)
    return model_not_found(m->get<std::string>()).to_response();
  std::vector<int32_t> ids;
  if (auto m = j.find("messages"); m != j.end()) {
    if (!m->is_array())
      return bad_request("'messages' must be an array of messages", "messages").to_response();
    auto r = renderer_->encode_chat(*m);
    if (!r.ok()) return bad_request(r.status().message(), "messages").to_response();
    ids = std::move(*r);
  } else if (auto p = j.find("prompt"); p != j.end() && p->is_string()) {
    bool special = true;
    if (auto s = j.find("add_special_tokens"); s != j.end() && s->is_boolean())
      special = s->get<bool>();
    ids = engine_->tokenizer().encode(p->get<std::string>(), special);
  } else {
    return bad_request("give 'prompt' (a string) or 'messages' (an array)", "prompt").to_response();
  }
  return json_response(
      Json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine_->max_model_len()}});
}

HttpResponse Router::detokenize(const HttpRequest& req) const {
  Json j = Json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return bad_request("The request body must be a JSON object").to_response();
  auto t = j.find("tokens");
  if (t == j.end() || !t->is_array())
    return bad_request("'tokens' must be an array of token ids", "tokens").to_response();
  std::vector<int32_t> ids;
  const int32_t vocab = engine_->tokenizer().vocab_size();
  for (const Json& x : *t) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab)
      return bad_request("'tokens' must hold token ids in [0, " + std::to_string(vocab) + ")",
                         "tokens")
          .to_response();
    ids.push_back(x.get<int32_t>());
  }
  return json_response(Json{{"prompt", engine_->tokenizer().decode(ids, false)}});
}

HttpResponse Router::models() const {
  Json model = {{"id", config_.served_model_name},
                {"object", "model"},
                {"created", started_at_},
                {"owned_by", "kite"},
                {"root", engine_->config().model_dir},
                {"max_model_len", engine_->max_model_len()}};
  return json_response(Json{{"object", "list"}, {"data", Json::array({model})}});
}

HttpResponse Router::web_page() const {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(web_index_html());
  return r;
}

HttpResponse Router::health() const {
  if (draining()) return service_unavailable("the server is shutting down").to_response();
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  r.body = "ok\n";
  return r;
}

HttpResponse Router::metrics_text() const {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.render(engine_->stats(), in_flight_ ? in_flight_->load() : 0);
  return r;
}

}  // namespace kite::server
