// JSON builders for OpenAI response objects: chat.completion(.chunk), text_completion, usage,
// and the two logprobs shapes:
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
//                 "logprob", "bytes"}]}]}
//   completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}],
//                 "text_offset"}
// Token strings are the token's bytes; bytes that are not valid UTF-8 on their own (a piece of
// a multi-byte character) are replaced by U+FFFD in the string and kept exact in "bytes".
//
// JSON has no -inf: a logprob of -inf (a token the filters made impossible) or below
// kMinLogprob is reported as kMinLogprob (-9999.0), as vLLM does.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request_output.h"
#include "tokenizer/tokenizer.h"

namespace kite::server {

using Json = nlohmann::ordered_json;

inline constexpr double kMinLogprob = -9999.0;
double json_logprob(float logprob);

// Serializes with invalid UTF-8 replaced by U+FFFD (never throws).
std::string dump_json(const Json& j);
// One Server-Sent Event: "data: <json>\n\n".
std::string sse_event(const Json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};
Json usage_json(const Usage& u);

// {"content": [...]} for `tokens` (chat).
Json chat_logprobs(const Tokenizer& tok, const std::vector<TokenLogprobs>& tokens);

// Completions logprobs for `tokens`; text_offset counts characters from `*text_chars`, which is
// advanced past these tokens (so streamed chunks continue where the previous one stopped).
Json completion_logprobs(const Tokenizer& tok, const std::vector<TokenLogprobs>& tokens,
                         int64_t* text_chars);

// The envelope shared by every response object of one request.
struct ResponseHeader {
  std::string id;       // "chatcmpl-..." | "cmpl-..."
  std::string object;   // "chat.completion" | "chat.completion.chunk" | "text_completion"
  int64_t created = 0;  // unix seconds
  std::string model;
};
Json response_object(const ResponseHeader& h, Json choices);

}  // namespace kite::server
