#include "sampling/logits_processors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace kite {
namespace {

std::vector<float> random_logits(size_t n, uint32_t seed, float lo = -8.0f, float hi = 8.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<float> penalised(std::vector<float> logits, const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& output, const SamplingParams& p) {
  PenaltyScratch scratch;
  apply_penalties(logits, TokenHistory{prompt, output}, p, scratch);
  return logits;
}

const std::vector<float> kLogits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
const std::vector<int32_t> kPrompt = {0, 1, 0};
const std::vector<int32_t> kOutput = {3, 3, 4};

TEST(LogitsProcessors, RepetitionPenaltyHandComputed) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  // Prompt and output tokens: positive logits divided, negative multiplied.
  const std::vector<float> want = {2.0f / 1.5f, -1.5f, 0.5f, 2.0f, -3.0f, 1.0f};
  const auto got = penalised(kLogits, kPrompt, kOutput, p);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(LogitsProcessors, PresencePenaltyHitsOutputTokensOnce) {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  // Only output tokens 3 (twice) and 4 (once), each by 0.5; prompt tokens untouched.
  const std::vector<float> want = {2.0f, -1.0f, 0.5f, 2.5f, -2.5f, 1.0f};
  const auto got = penalised(kLogits, kPrompt, kOutput, p);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(LogitsProcessors, FrequencyPenaltyScalesWithCount) {
  SamplingParams p;
  p.frequency_penalty = 0.25f;
  const std::vector<float> want = {2.0f, -1.0f, 0.5f, 2.5f, -2.25f, 1.0f};
  const auto got = penalised(kLogits, kPrompt, kOutput, p);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(LogitsProcessors, AllPenaltiesCombineRepetitionFirst) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  // id3: 3/1.5 = 2, -0.25*2 - 0.5 = 1.0; id4: -2*1.5 = -3, -0.25 - 0.5 = -3.75.
  const std::vector<float> want = {2.0f / 1.5f, -1.5f, 0.5f, 1.0f, -3.75f, 1.0f};
  const auto got = penalised(kLogits, kPrompt, kOutput, p);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(LogitsProcessors, NegativePenaltiesEncourageAndOutOfRangeIdsAreIgnored) {
  SamplingParams p;
  p.presence_penalty = -1.0f;
  p.frequency_penalty = -0.5f;
  p.repetition_penalty = 0.5f;  // < 1 rewards repeats
  const std::vector<int32_t> output = {5, -7, 6, 1000, 5};
  const auto got = penalised(kLogits, {2}, output, p);
  EXPECT_FLOAT_EQ(got[2], 0.5f / 0.5f);
  EXPECT_FLOAT_EQ(got[5], 1.0f / 0.5f + 0.5f * 2 + 1.0f);
  EXPECT_FLOAT_EQ(got[0], 2.0f);
  EXPECT_FLOAT_EQ(got[3], 3.0f);
}

TEST(LogitsProcessors, PenaltiesMatchNaiveReferenceAndScratchIsReusable) {
  std::mt19937 rng(7);
  PenaltyScratch scratch;  // shared across rounds: the reset invariant is under test
  for (int round = 0; round < 20; ++round) {
    const size_t vocab = 50 + round * 37;
    auto logits = random_logits(vocab, 100 + round);
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab) - 1);
    std::vector<int32_t> prompt(1 + round * 5), output(round * 3);
    for (auto& t : prompt) t = tok(rng);
    for (auto& t : output) t = tok(rng);
    SamplingParams p;
    p.repetition_penalty = 1.1f + 0.05f * round;
    p.presence_penalty = 0.3f;
    p.frequency_penalty = 0.2f;

    std::map<int32_t, int> count;
    std::set<int32_t> seen(prompt.begin(), prompt.end());
    for (int32_t t : output) ++count[t], seen.insert(t);
    std::vector<float> want = logits;
    for (int32_t t : seen) {
      float& l = want[t];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
      if (count.count(t)) l -= p.frequency_penalty * count[t] + p.presence_penalty;
    }
    apply_penalties(logits, TokenHistory{prompt, output}, p, scratch);
    for (size_t i = 0; i < vocab; ++i) ASSERT_NEAR(logits[i], want[i], 1e-5f) << round << " " << i;
  }
}

std::vector<Candidate> reference_sorted(const std::vector<float>& logits) {
  std::vector<Candidate> all;
  for (size_t i = 0; i < logits.size(); ++i) all.push_back({static_cast<int32_t>(i), logits[i]});
  std::stable_sort(all.begin(), all.end(),
                   [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
  return all;
}

TEST(LogitsProcessors, SelectTopKMatchesFullSortOnLargeVocab) {
  const auto logits = random_logits(151936, 11);
  const auto ref = reference_sorted(logits);
  std::vector<Candidate> got;
  for (int32_t k : {1, 5, 50, 1000, 20000, 151936, 200000}) {
    select_top_k(logits, k, got);
    ASSERT_EQ(got.size(), std::min<size_t>(k, logits.size())) << k;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].token_id, ref[i].token_id) << "k=" << k << " i=" << i;
      ASSERT_EQ(got[i].logit, ref[i].logit);
    }
  }
}

TEST(LogitsProcessors, SelectTopKBreaksTiesByLowestId) {
  // Few distinct values: many ties, in both the heap and the partition path.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> level(0, 4);
  std::vector<float> logits(3000);
  for (float& x : logits) x = 0.5f * level(rng) - 1.0f;
  const auto ref = reference_sorted(logits);  // stable: equal logits keep id order
  std::vector<Candidate> got;
  for (int32_t k : {3, 100, 700, 2999}) {
    select_top_k(logits, k, got);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].token_id, ref[i].token_id) << k;
  }
}

// Reference nucleus: full stable sort, keep while the mass before a token is < top_p.
std::set<int32_t> reference_top_p(const std::vector<float>& logits, float top_p) {
  const auto sorted = reference_sorted(logits);
  double total = 0;
  for (const auto& c : sorted) total += std::exp(double(c.logit) - sorted[0].logit);
  std::set<int32_t> keep;
  double before = 0;
  for (const auto& c : sorted) {
    if (before >= top_p * total) break;
    keep.insert(c.token_id);
    before += std::exp(double(c.logit) - sorted[0].logit);
  }
  return keep;
}

TEST(LogitsProcessors, TopPMatchesReferenceSortedOrNot) {
  // Peaked rows (small nucleus) and flat rows (nucleus of thousands: several chunks).
  for (auto [spread, top_p] : {std::pair{12.0f, 0.9f}, std::pair{1.0f, 0.5f},
                               std::pair{3.0f, 0.95f}, std::pair{6.0f, 0.01f}}) {
    const auto logits = random_logits(20000, 21, -spread, spread);
    const auto want = reference_top_p(logits, top_p);
    std::vector<Candidate> cands;
    for (size_t i = 0; i < logits.size(); ++i) cands.push_back({int32_t(i), logits[i]});
    apply_top_p(cands, /*sorted=*/false, top_p);
    std::set<int32_t> got;
    for (const auto& c : cands) got.insert(c.token_id);
    EXPECT_EQ(got, want) << "spread " << spread << " top_p " << top_p;
    EXPECT_TRUE(std::is_sorted(cands.begin(), cands.end(), better_candidate));

    std::vector<Candidate> sorted_cands = reference_sorted(logits);
    apply_top_p(sorted_cands, /*sorted=*/true, top_p);
    EXPECT_EQ(sorted_cands.size(), want.size());
  }
}

TEST(LogitsProcessors, DenseTopPMatchesReference) {
  // Peaked rows resolve in the sparse pass; flat ones need the full histogram.
  for (auto [spread, top_p, temperature] :
       {std::tuple{12.0f, 0.9f, 1.0f}, std::tuple{12.0f, 0.999f, 0.5f},
        std::tuple{1.0f, 0.5f, 1.0f}, std::tuple{3.0f, 0.95f, 1.5f}, std::tuple{6.0f, 1e-6f, 0.7f},
        std::tuple{20.0f, 0.3f, 2.0f}}) {
    auto logits = random_logits(30000, 23, -spread, spread);
    logits[17] = -INFINITY;
    const float m = *std::max_element(logits.begin(), logits.end());
    std::vector<float> scaled(logits.size()), weights(logits.size());
    double total = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      scaled[i] = (logits[i] - m) / temperature;
      weights[i] = std::exp(scaled[i]);
      total += weights[i];
    }
    const auto want = reference_top_p(scaled, top_p);
    std::vector<Candidate> cands;
    select_top_p(logits, weights, total, m, 1.0f / temperature, top_p, cands);
    std::set<int32_t> got;
    for (const auto& c : cands) {
      got.insert(c.token_id);
      EXPECT_NEAR(c.logit, scaled[c.token_id], 1e-4f);
    }
    EXPECT_EQ(got.size(), cands.size());  // no duplicates
    EXPECT_EQ(got, want) << "spread " << spread << " top_p " << top_p << " T " << temperature;
  }
}

TEST(LogitsProcessors, TopPKeepsAtLeastTheBestToken) {
  std::vector<Candidate> cands = {{4, 0.1f}, {9, 3.0f}, {2, 3.0f}};
  apply_top_p(cands, false, 1e-7f);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].token_id, 2);  // tie on 3.0: the lower id
}

TEST(LogitsProcessors, MinPKeepsTokensAboveFractionOfMax) {
  // Probabilities proportional to 1, 0.5, 0.25, 0.1, 0.35.
  std::vector<Candidate> cands = {{0, std::log(0.5f)},
                                  {1, 0.0f},
                                  {2, std::log(0.25f)},
                                  {3, std::log(0.1f)},
                                  {4, std::log(0.35f)}};
  apply_min_p(cands, 0.3f);
  std::vector<int32_t> ids;
  for (const auto& c : cands) ids.push_back(c.token_id);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 4}));  // order preserved
  apply_min_p(cands, 0.0f);
  EXPECT_EQ(cands.size(), 3u);
  apply_min_p(cands, 1.0f);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].token_id, 1);
}

}  // namespace
}  // namespace kite
