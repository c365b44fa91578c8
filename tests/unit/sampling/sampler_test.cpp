#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace kite {
namespace {

std::vector<float> random_logits(size_t n, uint32_t seed, float lo = -4.0f, float hi = 4.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

Sampler make_sampler(const SamplingParams& p) {
  auto s = Sampler::create(p);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

int32_t sample_id(Sampler& s, std::span<const float> logits, const TokenHistory& h = {}) {
  auto r = s.sample(logits, h);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->token_id : -1;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// log_softmax in double, the reference for logprobs.
std::vector<double> log_softmax(const std::vector<float>& v, double t = 1.0) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (float x : v) s += std::exp((x - m) / t);
  std::vector<double> out;
  for (float x : v) out.push_back((x - m) / t - std::log(s));
  return out;
}

TEST(Sampler, GreedyIsArgmaxWithTiesToLowestId) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s = make_sampler(p);
  for (uint32_t seed = 0; seed < 30; ++seed) {
    const auto logits = random_logits(5000 + seed, seed);
    EXPECT_EQ(sample_id(s, logits), argmax(logits));
  }
  std::vector<float> tie = {0.1f, 2.5f, -1.0f, 2.5f, 2.5f};
  EXPECT_EQ(sample_id(s, tie), 1);
}

TEST(Sampler, GreedySeesPenalties) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.frequency_penalty = 1.0f;
  Sampler s = make_sampler(p);
  std::vector<float> logits = {0.3f, 2.0f, 1.5f, -0.7f};
  std::vector<int32_t> out = {1};
  EXPECT_EQ(sample_id(s, logits, {{}, out}), 2);  // 2.0 - 1 < 1.5
  EXPECT_EQ(sample_id(s, logits, {}), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 50;
  p.top_p = 0.95f;
  auto run = [&](std::optional<uint64_t> seed) {
    SamplingParams q = p;
    q.seed = seed;
    Sampler s = make_sampler(q);
    std::vector<int32_t> tokens;
    for (uint32_t step = 0; step < 100; ++step) {
      const auto logits = random_logits(2000, 1000 + step, -2.0f, 2.0f);
      tokens.push_back(sample_id(s, logits, {{}, tokens}));
    }
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  EXPECT_NE(run(std::nullopt), run(std::nullopt));  // seeded from std::random_device
}

TEST(Sampler, TemperatureToZeroApproachesGreedy) {
  // A gap of >= 0.05 between the top two logits: at T = 1e-3 the runner-up has
  // probability < exp(-50). The argmax's share rises as T falls.
  auto logits = random_logits(1000, 5);
  const int32_t best = argmax(logits);
  logits[best] += 0.05f;
  double prev_share = 0.0;
  for (float t : {2.0f, 0.5f, 0.1f, 1e-3f, 1e-30f, 1e-45f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 9;
    Sampler s = make_sampler(p);
    int hits = 0;
    for (int i = 0; i < 2000; ++i) hits += sample_id(s, logits) == best;
    const double share = hits / 2000.0;
    EXPECT_GE(share, prev_share) << "T=" << t;
    if (t <= 1e-3f) {
      EXPECT_EQ(hits, 2000) << "T=" << t;
    }
    prev_share = share;
  }
  EXPECT_LT(prev_share, 2.0);
}

TEST(Sampler, TopK1AndTinyTopPEqualGreedy) {
  SamplingParams k1;
  k1.temperature = 1.5f;
  k1.top_k = 1;
  k1.seed = 1;
  SamplingParams p_tiny;
  p_tiny.temperature = 1.5f;
  p_tiny.top_p = 1e-6f;
  p_tiny.seed = 2;
  Sampler a = make_sampler(k1), b = make_sampler(p_tiny);
  for (uint32_t seed = 0; seed < 40; ++seed) {
    auto logits = random_logits(30000, 300 + seed, -1.0f, 1.0f);  // flat: sampling would wander
    EXPECT_EQ(sample_id(a, logits), argmax(logits));
    EXPECT_EQ(sample_id(b, logits), argmax(logits));
  }
}

// Draws `n` tokens and checks the counts against `probs` with a chi-square statistic.
// 20k draws; the bound is the 99.9% quantile for the degrees of freedom (seeded, so the
// test is deterministic; a wrong temperature or renormalisation gives chi2 in the hundreds).
void expect_distribution(Sampler& s, const std::vector<float>& logits,
                         const std::vector<double>& probs) {
  const int n = 20000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[sample_id(s, logits)];
  double chi2 = 0.0;
  int dof = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " was filtered out but drawn";
      continue;
    }
    const double expected = n * probs[i];
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++dof;
  }
  // 99.9% chi-square quantiles for 1..9 degrees of freedom.
  const double kQuantile[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};
  ASSERT_GE(dof, 1);
  ASSERT_LE(dof, 9);
  EXPECT_LT(chi2, kQuantile[dof]) << "dof " << dof;
}

std::vector<double> renormalised(const std::vector<double>& logp, const std::vector<int>& keep) {
  std::vector<double> p(logp.size(), 0.0);
  double z = 0;
  for (int i : keep) z += std::exp(logp[i]);
  for (int i : keep) p[i] = std::exp(logp[i]) / z;
  return p;
}

const std::vector<float> kSmall = {0.3f, -1.1f, 1.2f, 0.05f, -0.4f, 0.9f, -2.0f, 0.6f};

TEST(Sampler, EmpiricalDistributionMatchesSoftmaxOverTemperature) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.seed = 123;
  Sampler s = make_sampler(p);
  const auto logp = log_softmax(kSmall, 0.7);
  std::vector<double> probs;
  for (double l : logp) probs.push_back(std::exp(l));
  expect_distribution(s, kSmall, probs);
}

TEST(Sampler, EmpiricalDistributionAfterTopKTopPMinP) {
  const auto logp = log_softmax(kSmall, 0.8);  // sorted ids: 2, 5, 7, 0, 3, 4, 1, 6
  {
    SamplingParams p;
    p.temperature = 0.8f;
    p.top_k = 4;
    p.seed = 5;
    Sampler s = make_sampler(p);
    expect_distribution(s, kSmall, renormalised(logp, {2, 5, 7, 0}));
  }
  {
    // Probabilities in order 2, 5, 7, 0, 3, 4: the mass before id 3 (5th) is 0.847 < 0.85,
    // before id 4 (6th) 0.928, so top_p = 0.85 keeps five tokens.
    SamplingParams p;
    p.temperature = 0.8f;
    p.top_p = 0.85f;
    p.seed = 6;
    Sampler s = make_sampler(p);
    expect_distribution(s, kSmall, renormalised(logp, {2, 5, 7, 0, 3}));
  }
  {
    // min_p = 0.4: keep p_i / p_max >= 0.4, i.e. logit >= 1.2 + 0.8 * log(0.4) = 0.467.
    SamplingParams p;
    p.temperature = 0.8f;
    p.min_p = 0.4f;
    p.seed = 7;
    Sampler s = make_sampler(p);
    expect_distribution(s, kSmall, renormalised(logp, {2, 5, 7}));
  }
}

TEST(Sampler, MinPNeverDrawsFilteredTokensOnLargeVocab) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;
  p.seed = 77;
  Sampler s = make_sampler(p);
  const auto logits = random_logits(50000, 8, -6.0f, 6.0f);
  const float threshold = *std::max_element(logits.begin(), logits.end()) + std::log(0.2f);
  for (int i = 0; i < 300; ++i) EXPECT_GE(logits[sample_id(s, logits)], threshold);
}

TEST(Sampler, NegInfLogitsAreNeverSampled) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 4;
  std::vector<float> logits = random_logits(64, 12);
  for (size_t i = 0; i < logits.size(); i += 2) logits[i] = -INFINITY;
  for (int variant = 0; variant < 3; ++variant) {
    SamplingParams q = p;
    if (variant == 1) q.top_p = 0.99f;
    if (variant == 2) q.top_k = 60;  // more than the 32 finite ones
    Sampler s = make_sampler(q);
    for (int i = 0; i < 500; ++i) EXPECT_EQ(sample_id(s, logits) % 2, 1);
  }
}

TEST(Sampler, LogprobsArePenalisedLogSoftmaxBeforeTemperature) {
  const auto logits = random_logits(151936, 31);
  std::vector<int32_t> output = {17, 17, 90000, 5};
  SamplingParams p;
  p.temperature = 0.6f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.presence_penalty = 0.4f;
  p.repetition_penalty = 1.2f;
  p.logprobs = true;
  p.top_logprobs = 20;
  p.seed = 3;
  Sampler s = make_sampler(p);
  auto r = s.sample(logits, {{}, output});
  ASSERT_TRUE(r.ok()) << r.status().message();

  std::vector<float> pen = logits;
  for (int32_t t : {17, 90000, 5}) {
    pen[t] = pen[t] > 0 ? pen[t] / 1.2f : pen[t] * 1.2f;
    pen[t] -= 0.4f;
  }
  const auto ref = log_softmax(pen);  // temperature 1: the convention
  ASSERT_TRUE(r->logprob.has_value());
  EXPECT_NEAR(*r->logprob, ref[r->token_id], 1e-4);

  std::vector<int32_t> order(pen.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                    [&](int32_t a, int32_t b) { return pen[a] > pen[b]; });
  ASSERT_EQ(r->top_logprobs.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(r->top_logprobs[i].token_id, order[i]);
    EXPECT_NEAR(r->top_logprobs[i].logprob, ref[order[i]], 1e-4);
    if (i > 0) {
      EXPECT_LE(r->top_logprobs[i].logprob, r->top_logprobs[i - 1].logprob);
    }
  }
}

TEST(Sampler, LogprobsOfWholeSmallVocabSumToOne) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.top_logprobs = 20;
  Sampler s = make_sampler(p);
  for (uint32_t seed = 0; seed < 10; ++seed) {
    const auto logits = random_logits(20, seed, -10.0f, 10.0f);
    auto r = s.sample(logits, {});
    ASSERT_TRUE(r.ok());
    double sum = 0;
    for (const auto& tl : r->top_logprobs) sum += std::exp(double(tl.logprob));
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_EQ(r->top_logprobs[0].token_id, r->token_id);
    EXPECT_EQ(r->top_logprobs[0].logprob, *r->logprob);
  }
  SamplingParams no_lp;
  Sampler q = make_sampler(no_lp);
  auto r = q.sample(random_logits(20, 1), {});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->logprob.has_value());
  EXPECT_TRUE(r->top_logprobs.empty());
}

TEST(Sampler, BrokenLogitsAreErrorsNotTokens) {
  Sampler s = make_sampler(SamplingParams{});
  auto logits = random_logits(100, 2);
  logits[37] = NAN;
  auto r = s.sample(logits, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("token id 37"), std::string::npos) << r.status().message();
  logits[37] = INFINITY;
  EXPECT_FALSE(s.sample(logits, {}).ok());
  std::vector<float> all_masked(10, -INFINITY);
  r = s.sample(all_masked, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("-inf"), std::string::npos);
  EXPECT_FALSE(s.sample(std::span<const float>(), {}).ok());
}

TEST(Sampler, CreateRejectsInvalidParams) {
  SamplingParams p;
  p.top_p = 1.5f;
  auto s = Sampler::create(p);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "top_p must be in (0, 1], got 1.5");
}

}  // namespace
}  // namespace kite
