#include "core/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace kite::vec {
namespace {

std::vector<float> random_row(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Sizes around the 8-lane vector width and the 512-entry block, so tails are exercised.
const size_t kSizes[] = {1, 7, 8, 9, 511, 512, 513, 1029, 151936};

TEST(VecMath, RowMaxFirstIndexAndBadValues) {
  for (size_t n : kSizes) {
    auto x = random_row(n, static_cast<uint32_t>(n), -30.0f, 30.0f);
    const size_t want = std::max_element(x.begin(), x.end()) - x.begin();
    RowMax rm = row_max(x);
    EXPECT_EQ(rm.max, x[want]);
    EXPECT_FALSE(rm.has_nan_or_pos_inf);
    EXPECT_EQ(first_index_of(x, rm.max), want);
    x[n / 2] = NAN;
    EXPECT_TRUE(row_max(x).has_nan_or_pos_inf) << n;
    x[n / 2] = INFINITY;
    EXPECT_TRUE(row_max(x).has_nan_or_pos_inf) << n;
    x[n / 2] = -INFINITY;
    EXPECT_FALSE(row_max(x).has_nan_or_pos_inf) << n;
  }
  std::vector<float> ties = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f, 0.0f, 3.0f, 3.0f, 3.0f, 3.0f};
  EXPECT_EQ(first_index_of(ties, 3.0f), 1u);
  EXPECT_EQ(first_index_of(ties, 7.0f), ties.size());
  EXPECT_EQ(row_max(std::vector<float>(9, -INFINITY)).max, -INFINITY);
}

TEST(VecMath, SumExpMatchesDoubleReference) {
  for (size_t n : kSizes) {
    // Arguments down to -78 (exp ~1e-34), still above float's underflow.
    auto x = random_row(n, 40 + static_cast<uint32_t>(n), -55.0f, 5.0f);
    if (n > 3) x[3] = -INFINITY;
    const float shift = 5.0f, scale = 1.3f;
    // The reference takes the same float argument: this tests exp and the summation.
    auto arg = [&](float v) { return static_cast<double>((v - shift) * scale); };
    double want = 0;
    for (float v : x) want += std::exp(arg(v));
    const double got = sum_exp(x, shift, scale);
    EXPECT_NEAR(got / want, 1.0, 1e-6) << n;

    std::vector<float> w(n);
    std::vector<double> blocks;
    EXPECT_NEAR(exp_weights(x, shift, scale, w, blocks) / want, 1.0, 1e-6);
    ASSERT_EQ(blocks.size(), (n + kWeightBlock - 1) / kWeightBlock);
    for (size_t i = 0; i < n; ++i) {
      const double ref = std::exp(arg(x[i]));
      ASSERT_NEAR(w[i], ref, 4e-7 * ref + 1e-37) << i;  // relative, ~3 ulp
    }
    if (n > 3) {
      EXPECT_EQ(w[3], 0.0f);  // -inf: exactly zero weight
    }
  }
}

TEST(VecMath, DrawIndexInvertsTheCumulativeSum) {
  auto x = random_row(1500, 5, -3.0f, 0.0f);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = -INFINITY;  // zero weights are skipped
  std::vector<float> w(x.size());
  std::vector<double> blocks;
  const double total = exp_weights(x, 0.0f, 1.0f, w, blocks);
  std::mt19937 rng(8);
  for (int t = 0; t < 2000; ++t) {
    const double target = std::uniform_real_distribution<double>(0.0, total)(rng);
    const size_t got = draw_index(w, blocks, target);
    double before = 0;
    for (size_t i = 0; i < got; ++i) before += w[i];
    ASSERT_GT(w[got], 0.0f);
    ASSERT_LE(before, target * (1 + 1e-12));
    ASSERT_GT(before + w[got], target * (1 - 1e-12));
  }
  EXPECT_EQ(draw_index(w, blocks, total * 2), x.size() - 1);  // past the end: last positive
}

TEST(VecMath, NextGreaterFindsEveryCrossing) {
  auto x = random_row(1037, 6, -1.0f, 1.0f);
  std::vector<size_t> want, got;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] > 0.9f) want.push_back(i);
  }
  for (size_t i = next_greater(x, 0, 0.9f); i < x.size(); i = next_greater(x, i + 1, 0.9f)) {
    got.push_back(i);
  }
  EXPECT_EQ(got, want);
  EXPECT_FALSE(want.empty());
}

}  // namespace
}  // namespace kite::vec
