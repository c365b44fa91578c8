// Parsing of OpenAI request bodies (POST /v1/chat/completions and /v1/completions) into a
// GenerationRequest: the prompt(s) as sent plus validated SamplingParams. Parsing checks types
// and ranges and names the offending parameter in the error (HTTP 400); it does not tokenize
// (routes do that with the PromptRenderer) and knows nothing about HTTP or the engine.
//
// Accepted parameters: model, messages | prompt, n, stream, stream_options.include_usage,
// max_tokens, max_completion_tokens, temperature, top_p, top_k, min_p, seed, stop,
// stop_token_ids, presence_penalty, frequency_penalty, repetition_penalty, logprobs,
// top_logprobs, priority (lower is served first), ignore_eos. Unknown fields are ignored,
// as OpenAI-compatible servers commonly do; `echo`, `suffix` and `best_of` > n are refused.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/sampling_params.h"
#include "server/api_error.h"

namespace kite::server {

enum class ApiKind { kChat, kCompletion };

// One completions prompt: text to tokenize, or token ids as sent.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int32_t> token_ids;  // used when text is empty
};

struct GenerationRequest {
  ApiKind kind = ApiKind::kChat;
  std::optional<std::string> model;
  nlohmann::ordered_json messages;        // chat: [{role, content: string}, ...]
  nlohmann::ordered_json template_extra;  // chat: extra template variables (tools)
  std::vector<PromptInput> prompts;       // completions: at least one
  int32_t n = 1;                          // choices per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Completions' logprobs=k sets sampling.logprobs and sampling.top_logprobs = k.
  SamplingParams sampling;  // validated
  int32_t priority = 0;
};

// The most choices one request may ask for (n x number of prompts).
inline constexpr int32_t kMaxChoices = 128;

// Bounds on what one request may ask for (`kite serve` flags), so that a hostile or broken
// client costs a quick 400 instead of engine time. The body size and max_tokens are bounded
// elsewhere (HttpServerConfig, and prompt + max_tokens <= max_model_len in the engine).
struct RequestLimits {
  int64_t max_choices = kMaxChoices;  // n x number of prompts
  size_t max_messages = 1024;         // chat messages
  size_t max_stop_strings = 16;       // 'stop' entries (OpenAI itself allows 4)
  size_t max_stop_bytes = 1024;       // length of one stop string
  size_t max_stop_token_ids = 1024;   // 'stop_token_ids' entries
};

// Parses and validates a request body; nullopt on success.
std::optional<ApiError> parse_generation_request(ApiKind kind, std::string_view body,
                                                 GenerationRequest* out,
                                                 const RequestLimits& limits = {});

}  // namespace kite::server
