// OpenAI request body -> GenerationRequest, with 400s that name the parameter; see
// openai_request.h. Field readers below leave defaults untouched for absent or null fields.
#include "server/openai_request.h"

#include <cmath>
#include <limits>

namespace kite::server {
namespace {

using Json = nlohmann::ordered_json;

// Reads optional fields of the request object; each getter leaves `*out` untouched when the
// field is absent or null, and returns an error naming the field when its type is wrong.
class Fields {
 public:
  explicit Fields(const Json& j) : j_(j) {}

  const Json* get(const char* name) const {
    auto it = j_.find(name);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<ApiError> number(const char* name, float* out) const {
    const Json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) return type_error(name, "a number");
    const double d = v->get<double>();
    if (!std::isfinite(d)) return type_error(name, "a finite number");
    *out = static_cast<float>(d);
    return std::nullopt;
  }

  std::optional<ApiError> integer(const char* name, int64_t lo, int64_t hi, int64_t* out) const {
    const Json* v = get(name);
    if (!v) return std::nullopt;
    // 5.0 is accepted as 5, as Python servers do.
    if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
        std::fabs(v->get<double>()) < 9e15) {
      *out = static_cast<int64_t>(v->get<double>());
    } else if (v->is_number_integer()) {
      *out = v->is_number_unsigned() &&
                     v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                 ? std::numeric_limits<int64_t>::max()
                 : v->get<int64_t>();
    } else {
      return type_error(name, "an integer");
    }
    if (*out < lo || *out > hi)
      return bad_request("'" + std::string(name) + "' must be in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "], got " + std::to_string(*out),
                         name);
    return std::nullopt;
  }

  std::optional<ApiError> boolean(const char* name, bool* out) const {
    const Json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) return type_error(name, "a boolean");
    *out = v->get<bool>();
    return std::nullopt;
  }

  static ApiError type_error(const std::string& name, const char* what) {
    return bad_request("'" + name + "' must be " + what, name);
  }

 private:
  const Json& j_;
};

// Message content: a string, or an array of {"type": "text", "text": ...} parts (joined).
std::optional<ApiError> normalize_content(Json& message, size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  auto it = message.find("content");
  if (it == message.end() || it->is_null() || it->is_string()) return std::nullopt;
  if (!it->is_array()) return Fields::type_error(param, "a string or an array of text parts");
  std::string text;
  for (size_t k = 0; k < it->size(); ++k) {
    const Json& part = (*it)[k];
    const std::string pp = param + "[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return Fields::type_error(pp, "an object with a string 'type'");
    if (part["type"] != "text")
      return bad_request("content part type '" + part["type"].get<std::string>() +
                             "' is not supported (only 'text')",
                         pp + ".type");
    if (!part.contains("text") || !part["text"].is_string())
      return Fields::type_error(pp + ".text", "a string");
    text += part["text"].get<std::string>();
  }
  *it = text;
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const Json& j, const RequestLimits& limits,
                                       GenerationRequest* out) {
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return bad_request("'messages' is required", "messages");
  if (!it->is_array() || it->empty())
    return Fields::type_error("messages", "a non-empty array of messages");
  if (it->size() > limits.max_messages)
    return bad_request("'messages' has " + std::to_string(it->size()) +
                           " messages; the server's limit is " +
                           std::to_string(limits.max_messages) + " (--max-messages)",
                       "messages");
  out->messages = *it;
  for (size_t i = 0; i < out->messages.size(); ++i) {
    Json& m = out->messages[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Fields::type_error(p, "an object");
    if (!m.contains("role") || !m["role"].is_string())
      return Fields::type_error(p + ".role", "a string");
    if (auto e = normalize_content(m, i)) return e;
  }
  if (auto t = j.find("tools"); t != j.end() && !t->is_null()) out->template_extra["tools"] = *t;
  return std::nullopt;
}

std::optional<ApiError> parse_token_ids(const Json& arr, const std::string& param, PromptInput* p) {
  for (const Json& t : arr) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return Fields::type_error(param, "an array of non-negative integer token ids");
    p->token_ids.push_back(t.get<int32_t>());
  }
  if (p->token_ids.empty()) return bad_request("'" + param + "' is an empty list of tokens", param);
  return std::nullopt;
}

// prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]
std::optional<ApiError> parse_prompt(const Json& j, GenerationRequest* out) {
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return bad_request("'prompt' is required", "prompt");
  const Json& p = *it;
  constexpr const char* kShape =
      "a string, an array of strings, or an array of token ids (or of arrays of them)";
  if (p.is_string()) {
    out->prompts.push_back(PromptInput{p.get<std::string>(), {}});
    return std::nullopt;
  }
  if (!p.is_array() || p.empty()) return Fields::type_error("prompt", kShape);
  if (p[0].is_number_integer()) {
    PromptInput in;
    if (auto e = parse_token_ids(p, "prompt", &in)) return e;
    out->prompts.push_back(std::move(in));
    return std::nullopt;
  }
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string param = "prompt[" + std::to_string(i) + "]";
    PromptInput in;
    if (p[i].is_string()) {
      in.text = p[i].get<std::string>();
    } else if (p[i].is_array()) {
      if (auto e = parse_token_ids(p[i], param, &in)) return e;
    } else {
      return Fields::type_error("prompt", kShape);
    }
    out->prompts.push_back(std::move(in));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const Fields& f, const RequestLimits& limits,
                                   SamplingParams* s) {
  if (const Json* v = f.get("stop")) {
    if (v->is_string()) {
      s->stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const Json& x : *v) {
        if (!x.is_string()) return Fields::type_error("stop", "a string or an array of strings");
        s->stop.push_back(x.get<std::string>());
      }
    } else {
      return Fields::type_error("stop", "a string or an array of strings");
    }
    if (s->stop.size() > limits.max_stop_strings)
      return bad_request("'stop' has " + std::to_string(s->stop.size()) +
                             " strings; the server's limit is " +
                             std::to_string(limits.max_stop_strings) + " (--max-stop-strings)",
                         "stop");
    for (const auto& x : s->stop) {
      if (x.empty()) return bad_request("'stop' strings must not be empty", "stop");
      if (x.size() > limits.max_stop_bytes)
        return bad_request("a 'stop' string is longer than the server's limit of " +
                               std::to_string(limits.max_stop_bytes) + " bytes",
                           "stop");
    }
  }
  if (const Json* v = f.get("stop_token_ids")) {
    if (!v->is_array()) return Fields::type_error("stop_token_ids", "an array of integers");
    if (v->size() > limits.max_stop_token_ids)
      return bad_request("'stop_token_ids' has more than " +
                             std::to_string(limits.max_stop_token_ids) + " entries",
                         "stop_token_ids");
    for (const Json& x : *v) {
      if (!x.is_number_integer())
        return Fields::type_error("stop_token_ids", "an array of integers");
      s->stop_token_ids.push_back(x.get<int32_t>());
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_logprobs(ApiKind kind, const Fields& f, SamplingParams* s) {
  int64_t top = 0;
  if (kind == ApiKind::kCompletion) {
    // Completions: logprobs is the number of alternatives (0 = only the sampled token's).
    const Json* v = f.get("logprobs");
    if (v && v->is_boolean())
      return Fields::type_error("logprobs", "an integer in [0, 20] for completions");
    int64_t k = -1;
    if (auto e = f.integer("logprobs", 0, kMaxTopLogprobs, &k)) return e;
    if (k >= 0) s->logprobs = true, s->top_logprobs = static_cast<int32_t>(k);
    return std::nullopt;
  }
  if (auto e = f.boolean("logprobs", &s->logprobs)) return e;
  if (auto e = f.integer("top_logprobs", 0, kMaxTopLogprobs, &top)) return e;
  if (top > 0 && !s->logprobs)
    return bad_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  s->top_logprobs = static_cast<int32_t>(top);
  return std::nullopt;
}

std::optional<ApiError> parse_sampling(ApiKind kind, const Fields& f, const RequestLimits& limits,
                                       GenerationRequest* out) {
  SamplingParams& s = out->sampling;
  for (auto [name, dst] : {std::pair{"temperature", &s.temperature},
                           {"top_p", &s.top_p},
                           {"min_p", &s.min_p},
                           {"presence_penalty", &s.presence_penalty},
                           {"frequency_penalty", &s.frequency_penalty},
                           {"repetition_penalty", &s.repetition_penalty}})
    if (auto e = f.number(name, dst)) return e;
  int64_t v = 0;
  if (auto e = f.integer("top_k", -1, std::numeric_limits<int32_t>::max(), &v)) return e;
  s.top_k = static_cast<int32_t>(v);
  if (f.get("seed")) {
    int64_t seed = 0;
    if (auto e = f.integer("seed", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max(), &seed))
      return e;
    s.seed = static_cast<uint64_t>(seed);
  }
  // Completions default to 16 tokens, as OpenAI and vLLM do; chat defaults to the rest of
  // the context. max_completion_tokens (the newer name) wins over max_tokens.
  int64_t max_tokens = kind == ApiKind::kCompletion ? 16 : -1;
  for (const char* name : {"max_tokens", "max_completion_tokens"})
    if (auto e = f.integer(name, 1, std::numeric_limits<int32_t>::max(), &max_tokens)) return e;
  if (max_tokens > 0) s.max_tokens = static_cast<int32_t>(max_tokens);
  if (auto e = parse_stop(f, limits, &s)) return e;
  if (auto e = parse_logprobs(kind, f, &s)) return e;
  if (auto e = f.boolean("ignore_eos", &s.ignore_eos)) return e;
  if (Status st = s.validate(); !st.ok()) {
    // validate() starts its message with the field name.
    const std::string& m = st.message();
    return bad_request(m, m.substr(0, m.find_first_of(" [=")));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_options(const Fields& f, const RequestLimits& limits,
                                      GenerationRequest* out) {
  if (const Json* m = f.get("model")) {
    if (!m->is_string()) return Fields::type_error("model", "a string");
    out->model = m->get<std::string>();
  }
  int64_t n = 1;
  if (auto e = f.integer("n", 1, limits.max_choices, &n)) return e;
  out->n = static_cast<int32_t>(n);
  int64_t best_of = n;
  if (auto e = f.integer("best_of", 1, limits.max_choices, &best_of)) return e;
  if (best_of != n) return bad_request("'best_of' different from 'n' is not supported", "best_of");
  bool echo = false;
  if (auto e = f.boolean("echo", &echo)) return e;
  if (echo) return bad_request("'echo' is not supported", "echo");
  if (f.get("suffix")) return bad_request("'suffix' is not supported", "suffix");
  if (auto e = f.boolean("stream", &out->stream)) return e;
  if (const Json* so = f.get("stream_options")) {
    if (!so->is_object()) return Fields::type_error("stream_options", "an object");
    if (!out->stream)
      return bad_request("'stream_options' is only allowed when 'stream' is true",
                         "stream_options");
    if (auto e = Fields(*so).boolean("include_usage", &out->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  int64_t priority = 0;
  if (auto e = f.integer("priority", std::numeric_limits<int32_t>::min(),
                         std::numeric_limits<int32_t>::max(), &priority))
    return e;
  out->priority = static_cast<int32_t>(priority);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_generation_request(ApiKind kind, std::string_view body,
                                                 GenerationRequest* out,
                                                 const RequestLimits& limits) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad_request("The request body is not valid JSON");
  if (!j.is_object()) return bad_request("The request body must be a JSON object");
  out->kind = kind;
  out->template_extra = Json::object();
  Fields f(j);
  if (auto e = parse_options(f, limits, out)) return e;
  if (auto e = kind == ApiKind::kChat ? parse_messages(j, limits, out) : parse_prompt(j, out))
    return e;
  const int64_t choices = static_cast<int64_t>(out->n) * std::max<size_t>(out->prompts.size(), 1);
  if (choices > limits.max_choices)
    return bad_request("n x number of prompts must be at most " +
                           std::to_string(limits.max_choices) + ", got " + std::to_string(choices),
                       "n");
  return parse_sampling(kind, f, limits, out);
}

}  // namespace kite::server
