// OpenAI response/chunk/logprobs JSON builders; see openai_response.h.
#include "server/openai_response.h"

#include <cmath>

namespace kite::server {
namespace {

Json bytes_array(std::string_view bytes) {
  Json a = Json::array();
  for (char c : bytes) a.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return a;
}

// Characters (code points) in `bytes`: bytes that are not UTF-8 continuation bytes.
int64_t count_chars(std::string_view bytes) {
  int64_t n = 0;
  for (char c : bytes) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

double json_logprob(float logprob) {
  if (!std::isfinite(logprob) || logprob < kMinLogprob) return kMinLogprob;
  return logprob;
}

std::string dump_json(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string sse_event(const Json& j) { return "data: " + dump_json(j) + "\n\n"; }

Json usage_json(const Usage& u) {
  return Json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

Json chat_logprobs(const Tokenizer& tok, const std::vector<TokenLogprobs>& tokens) {
  Json content = Json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string_view bytes = tok.token_bytes(t.token_id);
    Json top = Json::array();
    for (const TokenLogprob& alt : t.top) {
      const std::string_view b = tok.token_bytes(alt.token_id);
      top.push_back({{"token", std::string(b)},
                     {"logprob", json_logprob(alt.logprob)},
                     {"bytes", bytes_array(b)}});
    }
    content.push_back({{"token", std::string(bytes)},
                       {"logprob", json_logprob(t.logprob)},
                       {"bytes", bytes_array(bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return Json{{"content", std::move(content)}};
}

Json completion_logprobs(const Tokenizer& tok, const std::vector<TokenLogprobs>& tokens,
                         int64_t* text_chars) {
  Json out = {{"tokens", Json::array()},
              {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
  for (const TokenLogprobs& t : tokens) {
    const std::string_view bytes = tok.token_bytes(t.token_id);
    out["tokens"].push_back(std::string(bytes));
    out["token_logprobs"].push_back(json_logprob(t.logprob));
    // The sampled token is always listed, so there are up to logprobs + 1 entries (OpenAI).
    Json top = Json::object();
    for (const TokenLogprob& alt : t.top)
      top[std::string(tok.token_bytes(alt.token_id))] = json_logprob(alt.logprob);
    top[std::string(bytes)] = json_logprob(t.logprob);
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(*text_chars);
    *text_chars += count_chars(bytes);
  }
  return out;
}

Json response_object(const ResponseHeader& h, Json choices) {
  return Json{{"id", h.id},
              {"object", h.object},
              {"created", h.created},
              {"model", h.model},
              {"choices", std::move(choices)}};
}

}  // namespace kite::server
