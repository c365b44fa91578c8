#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include "kernel_test_util.h"
#include "kernels/ops.h"

namespace kite {
namespace {

using ops::MoeRoutingParams;
using ops::MoeScoring;
using ops::MoeTopkMethod;
using testing::random_tensor;

// torch.topk with the tie rule kite documents: descending, lower index first on ties.
std::vector<int> topk_ref(const std::vector<double>& v, int64_t k) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
  idx.resize(k);
  return idx;
}

// transformers' DeepseekV2Moe.route_tokens_to_experts / DeepseekV3TopkRouter, one token, with
// whole-vector masks as torch builds them.
void route_ref(const float* logits, int64_t num_experts, const MoeRoutingParams& p,
               std::vector<int>& ids, std::vector<double>& weights) {
  std::vector<double> scores(num_experts);
  if (p.scoring == MoeScoring::kSigmoid) {
    for (int64_t e = 0; e < num_experts; ++e) scores[e] = 1.0 / (1.0 + std::exp(-logits[e]));
  } else {
    const double max = *std::max_element(logits, logits + num_experts);
    double sum = 0;
    for (int64_t e = 0; e < num_experts; ++e) sum += (scores[e] = std::exp(logits[e] - max));
    for (double& s : scores) s /= sum;
  }
  std::vector<double> choice = scores;
  const bool noaux = p.method == MoeTopkMethod::kNoauxTc;
  if (noaux && p.correction_bias)
    for (int64_t e = 0; e < num_experts; ++e) choice[e] += p.correction_bias->f32()[e];
  if (p.method != MoeTopkMethod::kGreedy) {
    const int64_t size = num_experts / p.n_group;
    std::vector<double> group_scores(p.n_group);
    for (int64_t g = 0; g < p.n_group; ++g) {
      std::vector<double> members(choice.begin() + g * size, choice.begin() + (g + 1) * size);
      std::sort(members.rbegin(), members.rend());
      group_scores[g] = noaux ? members[0] + (size > 1 ? members[1] : 0.0) : members[0];
    }
    std::vector<bool> keep(p.n_group, false);
    for (int g : topk_ref(group_scores, p.topk_group)) keep[g] = true;
    const double masked = noaux ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t e = 0; e < num_experts; ++e)
      if (!keep[e / size]) choice[e] = masked;
  }
  ids = topk_ref(choice, p.top_k);
  weights.clear();
  double sum = 0;
  for (int id : ids) sum += weights.emplace_back(noaux ? scores[id] : choice[id]);
  for (double& w : weights) {
    if (p.norm_topk_prob) w /= sum + 1e-20;
    w *= p.routed_scaling_factor;
  }
}

struct RouteCase {
  std::string name;
  int64_t num_experts;
  MoeRoutingParams params;
  float bias_lo = 0, bias_hi = 0;  // correction bias range (noaux_tc only)
};
void PrintTo(const RouteCase& c, std::ostream* os) { *os << c.name; }

class MoeRouteTest : public ::testing::TestWithParam<RouteCase> {};

TEST_P(MoeRouteTest, MatchesTransformersReference) {
  RouteCase c = GetParam();
  std::mt19937 rng(71);
  const int64_t num_tokens = 9;
  Tensor logits = random_tensor({num_tokens, c.num_experts}, rng, -3.0f, 3.0f);
  Tensor bias = random_tensor({c.num_experts}, rng, c.bias_lo, c.bias_hi + 1e-6f);
  if (c.params.method == MoeTopkMethod::kNoauxTc) c.params.correction_bias = &bias;
  std::vector<int32_t> ids = {-7};
  std::vector<float> weights = {std::numeric_limits<float>::quiet_NaN()};
  ops::moe_route(logits, c.params, ids, weights);
  const int64_t k = c.params.top_k;
  ASSERT_EQ(ids.size(), static_cast<size_t>(num_tokens * k));
  ASSERT_EQ(weights.size(), static_cast<size_t>(num_tokens * k));
  for (int64_t t = 0; t < num_tokens; ++t) {
    std::vector<int> want_ids;
    std::vector<double> want_w;
    route_ref(logits.data<float>() + t * c.num_experts, c.num_experts, c.params, want_ids, want_w);
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_EQ(ids[t * k + i], want_ids[i]) << "token " << t << " rank " << i;
      EXPECT_NEAR(weights[t * k + i], want_w[i], 1e-5 * std::fabs(want_w[i]) + 1e-7)
          << "token " << t << " rank " << i;
    }
  }
}

MoeRoutingParams make_params(MoeScoring scoring, MoeTopkMethod method, int64_t top_k,
                             int64_t n_group, int64_t topk_group, bool norm, float scale) {
  MoeRoutingParams p;
  p.scoring = scoring;
  p.method = method;
  p.top_k = top_k;
  p.n_group = n_group;
  p.topk_group = topk_group;
  p.norm_topk_prob = norm;
  p.routed_scaling_factor = scale;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, MoeRouteTest,
    ::testing::Values(
        RouteCase{"softmax_greedy_norm", 8,
                  make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGreedy, 2, 1, 1, true, 1.0f)},
        RouteCase{"v2_lite_greedy", 64,
                  make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGreedy, 6, 1, 1, false, 1.0f)},
        RouteCase{"v2_group_limited", 16,
                  make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGroupLimitedGreedy, 3, 4, 2,
                              false, 16.0f)},
        RouteCase{"v2_group_limited_top_k_1", 12,
                  make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGroupLimitedGreedy, 1, 3, 1,
                              false, 1.0f)},
        RouteCase{"v3_noaux", 32,
                  make_params(MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 4, 4, 2, true, 2.5f),
                  -0.1f, 0.1f},
        RouteCase{"v3_noaux_negative_bias", 32,
                  make_params(MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 4, 8, 3, true, 2.5f),
                  -3.0f, -2.0f},
        RouteCase{"v3_noaux_no_norm_one_group", 16,
                  make_params(MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 3, 1, 1, false, 1.5f),
                  -0.5f, 0.5f}),
    [](const auto& info) { return info.param.name; });

TEST(MoeRoute, GreedyTiesPickLowerIndexFirst) {
  Tensor logits = Tensor::from_vector({1.0f, 3.0f, 3.0f, 0.0f}, {1, 4});
  std::vector<int32_t> ids;
  std::vector<float> w;
  ops::moe_route(logits,
                 make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGreedy, 2, 1, 1, false, 1.0f),
                 ids, w);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  const double denom = std::exp(1.0) + 2 * std::exp(3.0) + 1.0;
  EXPECT_NEAR(w[0], std::exp(3.0) / denom, 1e-6);
  EXPECT_NEAR(w[1], std::exp(3.0) / denom, 1e-6);
}

TEST(MoeRoute, GroupLimitedGreedyStaysInBestGroup) {
  // Groups {0,1} {2,3} {4,5}; group maxima 5, 4, 1 -> only group 0 is kept, so expert 2
  // (second best overall) loses to expert 0.
  Tensor logits = Tensor::from_vector({0.0f, 5.0f, 4.0f, 4.0f, 1.0f, 1.0f}, {1, 6});
  std::vector<int32_t> ids;
  std::vector<float> w;
  ops::moe_route(
      logits,
      make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGroupLimitedGreedy, 2, 3, 1, false, 2.0f),
      ids, w);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0}));
  double denom = 0;
  for (double l : {0.0, 5.0, 4.0, 4.0, 1.0, 1.0}) denom += std::exp(l);
  EXPECT_NEAR(w[0], 2.0 * std::exp(5.0) / denom, 1e-6);
  EXPECT_NEAR(w[1], 2.0 / denom, 1e-6);
}

TEST(MoeRoute, NoauxMasksWithMinusInfinityAndWeighsWithoutBias) {
  // sigmoid(0) = 0.5 everywhere; biases make every choice negative. Group 0 wins (sum of top
  // two -5.0 vs -5.4). A 0.0 mask would wrongly pick experts 2 and 3 from the dropped group.
  Tensor logits = Tensor::from_vector({0.0f, 0.0f, 0.0f, 0.0f}, {1, 4});
  Tensor bias = Tensor::from_vector({-3.0f, -3.0f, -2.9f, -3.5f}, {4});
  MoeRoutingParams p =
      make_params(MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 2, 2, 1, true, 3.0f);
  p.correction_bias = &bias;
  std::vector<int32_t> ids;
  std::vector<float> w;
  ops::moe_route(logits, p, ids, w);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(w[0], 1.5, 1e-6);  // 0.5 / (0.5 + 0.5) * 3
  EXPECT_NEAR(w[1], 1.5, 1e-6);
}

TEST(MoeRoute, RejectsBadConfigs) {
  std::mt19937 rng(72);
  Tensor logits = random_tensor({2, 8}, rng);
  std::vector<int32_t> ids;
  std::vector<float> w;
  auto route = [&](MoeRoutingParams p) { ops::moe_route(logits, p, ids, w); };
  EXPECT_THROW(route(make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGreedy, 9, 1, 1, false, 1)),
               std::invalid_argument);
  EXPECT_THROW(route(make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGreedy, 0, 1, 1, false, 1)),
               std::invalid_argument);
  EXPECT_THROW(route(make_params(MoeScoring::kSoftmax, MoeTopkMethod::kGroupLimitedGreedy, 2, 3, 1,
                                 false, 1)),
               std::invalid_argument);  // 3 groups do not divide 8 experts
  EXPECT_THROW(route(make_params(MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 2, 4, 5, false, 1)),
               std::invalid_argument);
  Tensor short_bias = random_tensor({7}, rng);
  MoeRoutingParams p = make_params(MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 2, 4, 2, true, 1);
  p.correction_bias = &short_bias;
  EXPECT_THROW(route(p), std::invalid_argument);
}

}  // namespace
}  // namespace kite
