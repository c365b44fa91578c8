#include "sampling/logits_processors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "core/vec_math.h"

namespace kite {
namespace {
// better_candidate as a function object, so std algorithms inline it.
constexpr auto kBetter = [](const Candidate& a, const Candidate& b) {
  return better_candidate(a, b);
};
}  // namespace

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
    if (keep < n) std::nth_element(out.begin(), out.begin() + keep, out.end(), kBetter);
    out.resize(keep);
    std::sort(out.begin(), out.end(), kBetter);
    return;
  }

  // Heap whose front is the WORST kept candidate. Ids arrive in increasing order, so a
  // later token with an equal logit never beats a kept one: a strict `>` test suffices.
  out.reserve(keep);
  for (size_t i = 0; i < keep; ++i) out.push_back({static_cast<int32_t>(i), logits[i]});
  std::make_heap(out.begin(), out.end(), kBetter);
  float worst = out.front().logit;
  for (size_t i = vec::next_greater(logits, keep, worst); i < n;
       i = vec::next_greater(logits, i + 1, worst)) {
    std::pop_heap(out.begin(), out.end(), kBetter);
    out.back() = {static_cast<int32_t>(i), logits[i]};
    std::push_heap(out.begin(), out.end(), kBetter);
    worst = out.front().logit;
  }
  std::sort(out.begin(), out.end(), kBetter);
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
      if (next < n) std::nth_element(first, cands.begin() + next, cands.end(), kBetter);
      std::sort(first, cands.begin() + next, kBetter);
      sorted_end = next;
      chunk *= 4;
    }
    if (mass_before >= target) break;  // i >= 1 here: target > 0 keeps the best token
    mass_before += std::exp(cands[i].logit - m);
    if (++i == n) break;
  }
  cands.resize(i);
}

namespace {

// Radix buckets on the weights' float bits: for w in [0, 1] the bit pattern orders like the
// value, and its top 12 bits (exponent + 3 mantissa bits) split each octave in 8 buckets.
constexpr size_t kWeightKeys = 1024;
inline size_t weight_key(float w) {
  return std::min<size_t>(std::bit_cast<uint32_t>(w) >> 20, kWeightKeys - 1);
}
// A threshold t such that `w > t` <=> weight_key(w) >= key (for w > 0).
inline float weight_key_floor(size_t key) {
  if (key == 0) return 0.0f;
  return std::nextafter(std::bit_cast<float>(static_cast<uint32_t>(key) << 20), 0.0f);
}
// Tokens more than 2^16 times less likely than the best are histogrammed only when the rest
// do not reach top_p; a peaked row then costs a vectorised scan instead of a scalar pass.
const size_t kSparseKey = weight_key(0x1p-16f);

}  // namespace

void select_top_p(std::span<const float> row, std::span<const float> weights, double total,
                  float max_logit, float inv_temperature, float top_p,
                  std::vector<Candidate>& out) {
  out.clear();
  const double target = static_cast<double>(top_p) * total;
  std::array<double, kWeightKeys> mass{};
  double sparse_mass = 0.0;
  const float sparse_floor = weight_key_floor(kSparseKey);
  for (size_t i = vec::next_greater(weights, 0, sparse_floor); i < weights.size();
       i = vec::next_greater(weights, i + 1, sparse_floor)) {
    mass[weight_key(weights[i])] += weights[i];
    sparse_mass += weights[i];
  }
  if (sparse_mass < target) {
    // Four interleaved histograms: neighbours usually share a bucket, and one array would
    // serialise on its read-modify-write.
    std::array<std::array<double, kWeightKeys>, 4> tail{};
    for (size_t i = 0; i < weights.size(); ++i) {
      const size_t key = weight_key(weights[i]);
      if (key < kSparseKey) tail[i & 3][key] += weights[i];
    }
    for (size_t k = 0; k < kSparseKey; ++k)
      mass[k] = (tail[0][k] + tail[1][k]) + (tail[2][k] + tail[3][k]);
  }

  // The first bucket, from the top, whose inclusion reaches the target: every token above it
  // is in the nucleus and every token below it is out; only its own tokens need sorting.
  double above = 0.0;
  size_t boundary_key = kWeightKeys - 1;
  for (; boundary_key > 0; --boundary_key) {
    if (above + mass[boundary_key] >= target) break;
    above += mass[boundary_key];
  }

  thread_local std::vector<Candidate> boundary;
  boundary.clear();
  const float floor = weight_key_floor(boundary_key);
  for (size_t i = vec::next_greater(weights, 0, floor); i < weights.size();
       i = vec::next_greater(weights, i + 1, floor)) {
    const Candidate c{static_cast<int32_t>(i), (row[i] - max_logit) * inv_temperature};
    (weight_key(weights[i]) > boundary_key ? out : boundary).push_back(c);
  }
  std::sort(boundary.begin(), boundary.end(), kBetter);
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
