// SamplingParams: everything one request says about how its tokens are chosen and when it
// stops. A plain struct the server fills from the OpenAI request; `validate()` is called once
// at admission, and every consumer (Sampler, StopChecker) may assume a validated value.
//
// Conventions (chosen to match vLLM / OpenAI so clients see familiar behaviour):
// - Processing order in the sampler: penalties -> temperature -> top_k -> top_p -> min_p.
// - repetition_penalty uses Hugging Face semantics over prompt AND output tokens;
//   presence/frequency penalties use OpenAI semantics over OUTPUT tokens only.
// - `n` (several completions per prompt) is not here: the server fans a request out into n
//   requests, each with its own SamplingParams (and seed + i when a seed is given).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace kite {

struct SamplingParams {
  // Softmax temperature. 0 selects greedy decoding (argmax, ties to the lowest token id);
  // any positive value samples from softmax(logits / temperature).
  float temperature = 1.0f;

  // Keep only the top_k most likely tokens. 0 or -1 disables the filter; a value larger
  // than the vocabulary is the same as disabled.
  int32_t top_k = 0;

  // Nucleus sampling: keep the smallest set of most likely tokens whose probability mass
  // reaches top_p (always at least one token). In (0, 1]; 1 disables the filter.
  float top_p = 1.0f;

  // Keep tokens whose probability is at least min_p times that of the most likely token.
  // In [0, 1]; 0 disables the filter.
  float min_p = 0.0f;

  // Hugging Face repetition penalty over every token present in prompt + output:
  // logit > 0 ? logit / penalty : logit * penalty. Must be > 0; 1 disables it.
  float repetition_penalty = 1.0f;

  // OpenAI penalties over OUTPUT tokens only, each in [-2, 2]:
  // logit -= presence_penalty * (count > 0) + frequency_penalty * count.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;

  // Seed for this request's RNG. The same seed and the same sequence of logits give the
  // same tokens. Without a seed the RNG is seeded from std::random_device.
  std::optional<uint64_t> seed;

  // Maximum number of generated tokens (finish reason "length"). Unset: the engine's
  // context-length limit alone bounds the output.
  std::optional<int32_t> max_tokens;

  // Generation stops when the output text contains one of these strings; the string and
  // anything after it are not returned. Each must be non-empty valid UTF-8.
  std::vector<std::string> stop;

  // Generation stops when one of these tokens is sampled; its text is not returned.
  std::vector<int32_t> stop_token_ids;

  // Keep generating past the model's EOS token (benchmarks use this for fixed lengths).
  bool ignore_eos = false;

  // Return the sampled token's logprob, and top_logprobs (0..20) alternatives per position.
  // top_logprobs > 0 requires logprobs (the OpenAI rule).
  bool logprobs = false;
  int32_t top_logprobs = 0;

  bool is_greedy() const { return temperature == 0.0f; }

  // OK, or an invalid_argument Status naming the field, its allowed range and the value.
  Status validate() const;
};

// The most top_logprobs a request may ask for (the OpenAI limit).
inline constexpr int32_t kMaxTopLogprobs = 20;

}  // namespace kite
