// AWQ's scale search (quant/smoothing_search.h, quant/awq_loss.h): linears followed by an
// RMSNorm are measured after it, and the searched scales lower that error against no scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ops.h"
#include "quant/awq_loss.h"
#include "quant/quant_plan.h"
#include "quant/smoothing_search.h"

namespace kite {
namespace {

constexpr int64_t kHidden = 256, kRows = 256;

Tensor random_matrix(int64_t rows, int64_t cols, float sd, std::mt19937& rng) {
  Tensor t = Tensor::empty({rows, cols});
  std::normal_distribution<float> n(0.0f, sd);
  for (float& v : t.f32()) v = n(rng);
  return t;
}

// Activations as calibration records them, from the sample rows alone.
LinearActivations recorded(std::vector<LinearPart> parts, const Tensor& x) {
  LinearActivations a;
  a.parts = std::move(parts);
  a.in = x.size(1);
  a.rows = x.size(0);
  a.samples.assign(x.f32().begin(), x.f32().end());
  a.amax.assign(a.in, 0.0f);
  a.asum.assign(a.in, 0.0);
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t i = 0; i < a.in; ++i) {
      const float v = std::fabs(x.f32()[r * a.in + i]);
      a.amax[i] = std::max(a.amax[i], v);
      a.asum[i] += v;
    }
  return a;
}

// MLA's q_a and kv_a on a shared input with a few outlier channels (as RMSNorm outputs have),
// each followed by its RMSNorm.
struct SyntheticAttentionInput {
  std::vector<LinearActivations> acts;
  SyntheticAttentionInput() {
    std::mt19937 rng(7);
    Tensor x = random_matrix(kRows, kHidden, 1.0f, rng);
    for (int64_t c : {3, 77, 130, 200})
      for (int64_t r = 0; r < kRows; ++r) x.f32()[r * kHidden + c] *= 25.0f;
    LinearPart q_a{"model.layers.0.self_attn.q_a_proj", random_matrix(64, kHidden, 0.05f, rng)};
    LinearPart kv_a{"model.layers.0.self_attn.kv_a_proj_with_mqa",
                    random_matrix(40, kHidden, 0.05f, rng)};
    q_a.output_norm = Tensor::empty({64});
    kv_a.output_norm = Tensor::empty({32});  // 8 rotary channels stay unnormed
    for (float& v : q_a.output_norm.f32()) v = 0.7f;
    for (float& v : kv_a.output_norm.f32()) v = 1.5f;
    acts.push_back(recorded({q_a}, x));
    acts.push_back(recorded({kv_a}, x));
  }
};

TEST(AwqSearch, SearchedScalesLowerNormedOutputError) {
  SyntheticAttentionInput in;
  QuantPlan plan;
  plan.method = QuantMethod::kAwq;
  awq_plan(in.acts, plan);
  ASSERT_TRUE(plan.smoothing.count("model.layers.0.self_attn.q_a_proj"));
  const std::vector<float>& s = plan.smoothing.at("model.layers.0.self_attn.q_a_proj").s;
  EXPECT_EQ(s, plan.smoothing.at("model.layers.0.self_attn.kv_a_proj_with_mqa").s);
  ASSERT_TRUE(plan.norm_divisors.count("model.layers.0.input_layernorm.weight"));
  double scaled = 0, plain = 0;
  for (const AwqTarget& t : awq_targets({&in.acts[0], &in.acts[1]}, 512)) {
    scaled += awq_error(t, s, plan.group_size);
    plain += awq_error(t, std::vector<float>(kHidden, 1.0f), plan.group_size);
  }
  EXPECT_LT(scaled, 0.8 * plain) << "scaled " << scaled << " vs unscaled " << plain;
  EXPECT_GT(s[77], s[78]);  // the outlier channels' weight columns get finer steps
}

// q_a / kv_a are measured after the RMSNorm that follows them, over its channels only.
TEST(AwqSearch, NormedLinearIsMeasuredAfterItsNorm) {
  std::mt19937 rng(3);
  const Tensor x = random_matrix(8, kHidden, 1.0f, rng);
  LinearPart kv_a{"model.layers.2.self_attn.kv_a_proj_with_mqa",
                  random_matrix(6, kHidden, 0.1f, rng)};
  kv_a.output_norm = Tensor::empty({4});
  for (int64_t i = 0; i < 4; ++i) kv_a.output_norm.f32()[i] = 0.5f + i;
  const LinearActivations a = recorded({kv_a}, x);
  const std::vector<AwqTarget> targets = awq_targets({&a}, 512);
  ASSERT_EQ(targets.size(), 1u);
  Tensor y = Tensor::empty({8, 6});
  ops::linear(x, kv_a.weight, nullptr, y);
  for (int64_t r = 0; r < 8; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < 4; ++i) ss += y.f32()[r * 6 + i] * y.f32()[r * 6 + i];
    const double inv = 1.0 / std::sqrt(ss / 4 + kv_a.output_norm_eps);
    for (int64_t i = 0; i < 6; ++i) {
      const double want = i < 4 ? y.f32()[r * 6 + i] * inv * (0.5 + i) : y.f32()[r * 6 + i];
      EXPECT_NEAR(targets[0].y_ref.f32()[r * 6 + i], want, 1e-4 * (1 + std::fabs(want)));
    }
  }
}

// Calibration in the model's order loads what is not yet searched unquantized.
TEST(AwqSearch, PlanLeavesLayersAtOrAboveTheLimitUnquantized) {
  QuantPlan plan;
  plan.method = QuantMethod::kAwq;
  plan.quantize_layers_below = 2;
  std::mt19937 rng(5);
  Tensor w1 = random_matrix(4, 128, 1.0f, rng), w2 = w1.clone();
  auto below = plan_linear(plan, "model.layers.1.self_attn.o_proj", w1);
  auto at = plan_linear(plan, "model.layers.2.self_attn.o_proj", w2);
  ASSERT_TRUE(below.ok() && at.ok());
  EXPECT_TRUE(below->has_value());
  EXPECT_FALSE(at->has_value());
  // ... unless that linear was already searched (its clipping bounds are in the plan).
  plan.int4_clip["model.layers.2.self_attn.o_proj"] = std::vector<float>(4, 10.0f);
  Tensor w3 = w1.clone();
  auto searched = plan_linear(plan, "model.layers.2.self_attn.o_proj", w3);
  ASSERT_TRUE(searched.ok());
  EXPECT_TRUE(searched->has_value());
  EXPECT_EQ(QuantPlan::layer_of("model.layers.12.mlp.experts.3.up_proj"), 12);
  EXPECT_EQ(QuantPlan::layer_of("lm_head"), -1);
}

}  // namespace
}  // namespace kite
