// Sampler: chooses one request's next token from one row of logits.
//
// One Sampler per request (it owns the request's RNG); calls for one request happen one at
// a time, while Samplers of different requests may run on different threads at once
// (vocab-sized scratch buffers are per thread, not per request, so 1000 live requests do
// not hold 1000 copies of them).
//
// Pipeline: penalties -> greedy argmax (temperature 0; ties -> lowest id)
//           or temperature -> top_k -> top_p -> min_p -> draw from the renormalised rest.
// This is Hugging Face's warper order. vLLM v1 applies min_p before top_k/top_p, so the two
// differ when top_p and min_p are both set.
//
// Logprobs convention: the reported logprobs are log_softmax of the logits AFTER penalties
// and BEFORE temperature and top-k/top-p/min-p. They therefore describe the model's
// (penalised) distribution rather than the truncated one the token was drawn from, and
// a sampled token's logprob never is 0 just because a filter removed its rivals. vLLM v1's
// default ("raw_logprobs") is taken before penalties as well; the two agree whenever no
// penalty is set.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "core/status.h"
#include "sampling/logits_processors.h"
#include "sampling/sampling_params.h"

namespace kite {

struct TokenLogprob {
  int32_t token_id;
  float logprob;  // natural log; -inf for a token the logits (or penalties) made impossible
};

struct SampleResult {
  int32_t token_id = 0;
  // The sampled token's logprob; set only when params.logprobs (it costs a pass of exp over
  // the vocabulary, which greedy decoding would otherwise not need).
  std::optional<float> logprob;
  // params.top_logprobs best tokens, sorted by logprob descending (ties: lower id first).
  std::vector<TokenLogprob> top_logprobs;
};

class Sampler {
 public:
  // Validates `params`; the error names the offending field.
  static Result<Sampler> create(SamplingParams params);

  // Samples the next token from `logits` [vocab] (a row the caller keeps; it is not
  // modified). `history` feeds the penalties. Errors (Internal) when the logits are empty,
  // contain NaN or +inf, or are all -inf: a broken model must fail the request, not emit
  // an arbitrary token.
  Result<SampleResult> sample(std::span<const float> logits, const TokenHistory& history);

  const SamplingParams& params() const { return params_; }

 private:
  explicit Sampler(SamplingParams params);

  // Uniform in [0, 1) from 53 random bits; written out (not std::uniform_real_distribution)
  // so a seed gives the same draws with every standard library.
  double next_uniform();

  int32_t sample_random(std::span<const float> logits, float max_logit);

  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace kite
