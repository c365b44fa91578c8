// The steps that turn one row of model logits into the set a token is drawn from:
// penalties (in place on a dense row), then top-k / top-p / min-p on a candidate list.
// The Sampler chains them; they are separate functions so each can be tested by hand.
//
// Efficiency for vocabularies of ~150k: nothing here sorts the whole vocabulary unless
// the distribution really needs it. top-k is a single pass with a k-sized heap; top-p
// without top-k sorts the best candidates in growing chunks until the nucleus is covered.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace kite {

// The tokens a request has seen so far; the penalties read them. The spans borrow the
// caller's storage for the duration of one call. Ids outside [0, vocab) are ignored.
struct TokenHistory {
  std::span<const int32_t> prompt_token_ids;
  std::span<const int32_t> output_token_ids;
};

// A token and its logit (already divided by the temperature once in the sampler's
// candidate list).
struct Candidate {
  int32_t token_id;
  float logit;
};

// The one order used everywhere: higher logit first, equal logits -> lower token id first.
// It makes greedy, top-k, top-p and top-logprob results deterministic under ties.
inline bool better_candidate(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token_id < b.token_id);
}

// Reusable dense counters for apply_penalties. Invariant between calls: every entry of
// `output_count` and `seen` is zero, so a call costs O(history) and not O(vocab).
// One per thread (the sampler keeps a thread_local one); never shared between threads.
struct PenaltyScratch {
  std::vector<int32_t> output_count;  // [vocab] occurrences in the output
  std::vector<uint8_t> seen;          // [vocab] 1 if in prompt or output
  std::vector<int32_t> touched;       // ids whose entries must be reset afterwards
};

// True when any of the three penalties would change a logit.
bool has_penalties(const SamplingParams& params);

// Applies, in this order (vLLM's order), to `logits` [vocab] in place:
//   repetition (HF, prompt + output): l > 0 ? l / r : l * r
//   frequency and presence (OpenAI, output only): l -= f * count + p * (count > 0)
void apply_penalties(std::span<float> logits, const TokenHistory& history,
                     const SamplingParams& params, PenaltyScratch& scratch);

// Replaces `out` with the min(k, vocab) best entries of `logits`, sorted by
// better_candidate. O(vocab + k log k) for small k (a single pass with a heap).
void select_top_k(std::span<const float> logits, int32_t k, std::vector<Candidate>& out);

// Nucleus filter over `cands` (logits already temperature-scaled): keeps, in
// better_candidate order, each token while the probability mass of the better ones is
// still < top_p; the best token is always kept. `sorted` says whether `cands` is already
// in better_candidate order. When top_p < 1 the kept list comes back sorted; when
// top_p >= 1 nothing changes.
void apply_top_p(std::vector<Candidate>& cands, bool sorted, float top_p);

// apply_top_p for a whole dense row without sorting it. `weights[i]` must be
// exp((row[i] - max_logit) * inv_temperature) and `total` their sum (vec::exp_weights).
// Fills `out` with the nucleus, logits scaled the same way, in no particular order. Only the
// tokens of one narrow weight bucket (the one where the mass crosses top_p) are sorted.
void select_top_p(std::span<const float> row, std::span<const float> weights, double total,
                  float max_logit, float inv_temperature, float top_p, std::vector<Candidate>& out);

// Keeps candidates whose probability is >= min_p * (largest probability), i.e.
// logit >= max_logit + log(min_p). Preserves order. min_p <= 0 does nothing.
void apply_min_p(std::vector<Candidate>& cands, float min_p);

}  // namespace kite
