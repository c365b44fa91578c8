#include "sampling/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <bit>
#include <limits>

#include "sampling/vec_math.h"

namespace kite {

bool has_penalties(const SamplingParams& params) {
  return params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
         params.frequency_penalty != 0.0f;
}

void apply_penalties(std::span<float> logits, const TokenHistory& history,
                     const SamplingParams& params, PenaltyScratch& scratch) {
  const size_t vocab = logits.size();
  if (scratch.output_count.size() < vocab) {
    scratch.output_count.resize(vocab, 0);
    scratch.seen.resize(vocab, 0);
  }
  scratch.touched.clear();
  auto touch = [&](int32_t id) {
    if (!scratch.seen[id]) {
      scratch.seen[id] = 1;
      scratch.touched.push_back(id);
    }
  };
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && static_cast<size_t>(id) < vocab; };

  for (int32_t id : history.output_token_ids) {
    if (!in_vocab(id)) continue;
    ++scratch.output_count[id];
    touch(id);
  }
  const float rep = params.repetition_penalty;
  if (rep != 1.0f) {
    for (int32_t id : history.prompt_token_ids) {
      if (in_vocab(id)) touch(id);
    }
  }

  const float freq = params.frequency_penalty;
  const float presence = params.presence_penalty;
  for (int32_t id : scratch.touched) {
    float& l = logits[id];
    if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
    const int32_t count = scratch.output_count[id];
    if (count > 0) {
      // Two subtractions, as vLLM does them, so results agree to the last bit.
      l -= freq * static_cast<float>(count);
      l -= presence;
    }
    scratch.output_count[id] = 0;  // restore the all-zero invariant
    scratch.seen[id] = 0;
  }
}

void select_top_k(std::span<const float> logits, int32_t k, std::vector<Candidate>& out) {
  const size_t n = logits.size();
  const size_t keep = std::min(n, static_cast<size_t>(std::max(k, 0)));
  out.clear();
  if (keep == 0) return;

  if (keep * 16 > n) {
    // A large share of the vocabulary: partition once instead of churning a heap.
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = {static_cast<int32_t>(i), logits[i]};
    if (keep < n) std::nth_element(out.begin(), out.begin() + keep, out.end(), better_candidate);
    out.resize(keep);
    std::sort(out.begin(), out.end(), better_candidate);
    return;
  }

  // Heap whose front is the WORST kept candidate. Ids arrive in increasing order, so a
  // later token with an equal logit never beats a kept one: a strict `>` test suffices.
  out.reserve(keep);
  for (size_t i = 0; i < keep; ++i) out.push_back({static_cast<int32_t>(i), logits[i]});
  std::make_heap(out.begin(), out.end(), better_candidate);
  float worst = out.front().logit;
  for (size_t i = vec::next_greater(logits, keep, worst); i < n;
       i = vec::next_greater(logits, i + 1, worst)) {
    std::pop_heap(out.begin(), out.end(), better_candidate);
    out.back() = {static_cast<int32_t>(i), logits[i]};
    std::push_heap(out.begin(), out.end(), better_candidate);
    worst = out.front().logit;
  }
  std::sort(out.begin(), out.end(), better_candidate);
}

namespace {

float max_logit(const std::vector<Candidate>& cands, bool sorted) {
  if (sorted) return cands.front().logit;
  float m = -std::numeric_limits<float>::infinity();
  for (const Candidate& c : cands) m = std::max(m, c.logit);
  return m;
}

}  // namespace

void apply_top_p(std::vector<Candidate>& cands, bool sorted, float top_p) {
  if (top_p >= 1.0f || cands.empty()) return;
  const float m = max_logit(cands, sorted);
  double total = 0.0;
  for (const Candidate& c : cands) total += std::exp(c.logit - m);
  const double target = static_cast<double>(top_p) * total;

  // Walk the candidates in better_candidate order, sorting only as far as needed: the
  // nucleus of a peaked distribution is a few dozen tokens even in a 150k vocabulary.
  const size_t n = cands.size();
  size_t sorted_end = sorted ? n : 0;
  size_t chunk = 64;
  double mass_before = 0.0;
  size_t i = 0;
  while (true) {
    if (i == sorted_end) {
      const size_t next = std::min(n, sorted_end + chunk);
      auto first = cands.begin() + sorted_end;
      if (next < n) std::nth_element(first, cands.begin() + next, cands.end(), better_candidate);
      std::sort(first, cands.begin() + next, better_candidate);
      sorted_end = next;
      chunk *= 4;
    }
    if (mass_before >= target) break;  // i >= 1 here: target > 0 keeps the best token
    mass_before += std::exp(cands[i].logit - m);
    if (++i == n) break;
  }
  cands.resize(i);
}

void select_top_p(std::span<const float> row, std::span<const float> weights, double total,
                  float max_logit, float inv_temperature, float top_p,
                  std::vector<Candidate>& out) {
  out.clear();
  // Radix-select on the weights' float bits: for w in [0, 1] the bit pattern orders like the
  // value, and its top 12 bits (exponent + 3 mantissa bits) split each octave in 8 buckets.
  constexpr size_t kKeys = 1024;
  auto key_of = [](float w) { return std::min<size_t>(std::bit_cast<uint32_t>(w) >> 20, kKeys - 1); };
  std::array<double, kKeys> mass{};
  for (float w : weights) mass[key_of(w)] += w;

  // The first bucket, from the top, whose inclusion reaches the target: every token above it
  // is in the nucleus and every token below it is out; only its own tokens need sorting.
  const double target = static_cast<double>(top_p) * total;
  double above = 0.0;
  size_t boundary_key = kKeys - 1;
  for (; boundary_key > 0; --boundary_key) {
    if (above + mass[boundary_key] >= target) break;
    above += mass[boundary_key];
  }

  thread_local std::vector<Candidate> boundary;
  boundary.clear();
  for (size_t i = 0; i < row.size(); ++i) {
    const size_t key = key_of(weights[i]);
    if (key < boundary_key || weights[i] <= 0.0f) continue;
    const Candidate c{static_cast<int32_t>(i), (row[i] - max_logit) * inv_temperature};
    (key > boundary_key ? out : boundary).push_back(c);
  }
  std::sort(boundary.begin(), boundary.end(), better_candidate);
  double mass_before = above;
  for (const Candidate& c : boundary) {
    if (mass_before >= target) break;
    out.push_back(c);
    mass_before += weights[c.token_id];
  }
}

void apply_min_p(std::vector<Candidate>& cands, float min_p) {
  if (min_p <= 0.0f || cands.empty()) return;
  // p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p  <=>  l_i >= l_max + log(min_p).
  const float threshold = max_logit(cands, /*sorted=*/false) + std::log(min_p);
  std::erase_if(cands, [threshold](const Candidate& c) { return c.logit < threshold; });
}

}  // namespace kite
