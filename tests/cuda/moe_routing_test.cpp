#include "kernels/cuda/moe/moe_routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/ops.h"

namespace kite::cuda {
namespace {

using namespace testing;

struct MoeCase {
  std::string name;
  int64_t experts;
  ops::MoeRoutingParams params;
  bool with_bias = false;
};

std::vector<MoeCase> moe_cases() {
  using ops::MoeScoring;
  using ops::MoeTopkMethod;
  std::vector<MoeCase> cases;
  // DeepSeek-V2-Lite: softmax, greedy top-6 of 64, no renormalisation.
  cases.push_back({"v2_lite_softmax_greedy",
                   64,
                   {MoeScoring::kSoftmax, MoeTopkMethod::kGreedy, 6, 1, 1, false, 1.0f, nullptr}});
  // DeepSeek-V2: softmax, group-limited top-6 of 160 in 8 groups keeping 3, scaled by 16.
  cases.push_back(
      {"v2_group_limited",
       160,
       {MoeScoring::kSoftmax, MoeTopkMethod::kGroupLimitedGreedy, 6, 8, 3, false, 16.0f, nullptr}});
  // DeepSeek-V3: sigmoid, noaux_tc top-8 of 256 in 8 groups keeping 4, normalised, x2.5.
  cases.push_back({"v3_noaux_bias",
                   256,
                   {MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 8, 8, 4, true, 2.5f, nullptr},
                   true});
  cases.push_back({"v3_noaux_no_bias",
                   256,
                   {MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 8, 8, 4, true, 2.5f, nullptr},
                   false});
  // kite-tiny: 8 experts, 4 groups keeping 2, top-2.
  cases.push_back({"kite_tiny",
                   8,
                   {MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 2, 4, 2, true, 2.5f, nullptr},
                   true});
  // Softmax with renormalisation (Qwen-MoE style), top-8 of 60 experts.
  cases.push_back({"softmax_norm",
                   60,
                   {MoeScoring::kSoftmax, MoeTopkMethod::kGreedy, 8, 1, 1, true, 1.0f, nullptr}});
  // Above 256 experts the one-block-per-token kernel routes (the cases above take the
  // warp-per-token one).
  cases.push_back({"block_kernel_softmax_greedy",
                   300,
                   {MoeScoring::kSoftmax, MoeTopkMethod::kGreedy, 8, 1, 1, true, 1.0f, nullptr}});
  cases.push_back({"block_kernel_noaux_bias",
                   512,
                   {MoeScoring::kSigmoid, MoeTopkMethod::kNoauxTc, 8, 8, 4, true, 2.5f, nullptr},
                   true});
  return cases;
}

class CudaMoeRoutingTest : public ::testing::TestWithParam<std::tuple<MoeCase, DType>> {};

TEST_P(CudaMoeRoutingTest, MatchesCpuExpertsAndWeights) {
  const auto& [c, dtype] = GetParam();
  auto rng = test_rng();
  const int64_t tokens = 37, k = c.params.top_k;
  // Continuous random logits: ties have probability ~0 in fp32; in bf16 equal logits give
  // equal scores on both sides and the same lower-id-first order.
  Tensor logits = random_host({tokens, c.experts}, rng, -4.0f, 4.0f);
  round_to(logits, dtype);
  Tensor bias = random_host({c.experts}, rng, 0.0f, 0.1f);
  ops::MoeRoutingParams cpu_params = c.params;
  cpu_params.correction_bias = c.with_bias ? &bias : nullptr;
  std::vector<int32_t> ref_ids;
  std::vector<float> ref_w;
  ops::moe_route(logits, cpu_params, ref_ids, ref_w);

  Tensor dbias = upload(bias, DType::kF32);
  ops::MoeRoutingParams gpu_params = c.params;
  gpu_params.correction_bias = c.with_bias ? &dbias : nullptr;
  Tensor ids = device_poisoned({tokens, k}, DType::kI32);
  Tensor weights = device_poisoned({tokens, k}, DType::kF32);
  moe_route(upload(logits, dtype), gpu_params, ids, weights, test_stream());
  Tensor got_ids = to_host(ids, test_stream());
  Tensor got_w = download(weights);
  int mismatched = 0;
  for (int64_t i = 0; i < tokens * k; ++i) mismatched += got_ids.data<int32_t>()[i] != ref_ids[i];
  EXPECT_EQ(mismatched, 0) << "expert ids differ (same order expected)";
  KITE_EXPECT_CLOSE(got_w, Tensor::from_vector(ref_w, {tokens, k}), kTolF32);
}

INSTANTIATE_TEST_SUITE_P(Configs, CudaMoeRoutingTest,
                         ::testing::Combine(::testing::ValuesIn(moe_cases()),
                                            ::testing::Values(DType::kF32, DType::kBF16)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" +
                                  dtype_label(std::get<1>(info.param));
                         });

// Both kernels (64 experts: warp per token; 300: block per token): a row of NaN logits gets
// expert 0 with NaN weights, and the rows around it are routed as on the CPU.
TEST(CudaMoeRouting, NanRowGetsExpertZeroWithNanWeights) {
  auto rng = test_rng();
  for (const int64_t experts : {64, 300}) {
    SCOPED_TRACE(experts);
    const int64_t tokens = 3, k = 6;
    const ops::MoeRoutingParams params{ops::MoeScoring::kSoftmax, ops::MoeTopkMethod::kGreedy,
                                       k, 1, 1, true, 1.0f, nullptr};
    Tensor logits = random_host({tokens, experts}, rng, -4.0f, 4.0f);
    for (int64_t e = 0; e < experts; ++e) logits.data<float>()[experts + e] = NAN;
    Tensor ids = device_poisoned({tokens, k}, DType::kI32);
    Tensor weights = device_poisoned({tokens, k}, DType::kF32);
    moe_route(upload(logits, DType::kF32), params, ids, weights, test_stream());
    Tensor got_ids = to_host(ids, test_stream());
    Tensor got_w = download(weights);
    for (const int64_t t : {int64_t{0}, int64_t{2}}) {
      Tensor one = Tensor::from_vector(
          std::vector<float>(logits.data<float>() + t * experts,
                             logits.data<float>() + (t + 1) * experts),
          {1, experts});
      std::vector<int32_t> ref_ids;
      std::vector<float> ref_w;
      ops::moe_route(one, params, ref_ids, ref_w);
      for (int64_t r = 0; r < k; ++r) {
        EXPECT_EQ(got_ids.data<int32_t>()[t * k + r], ref_ids[r]) << "row " << t;
        EXPECT_NEAR(got_w.data<float>()[t * k + r], ref_w[r], 1e-6f) << "row " << t;
      }
    }
    for (int64_t r = 0; r < k; ++r) {
      EXPECT_EQ(got_ids.data<int32_t>()[k + r], 0);
      EXPECT_TRUE(std::isnan(got_w.data<float>()[k + r]));
    }
  }
}

TEST(CudaMoeRouting, RejectsBadParams) {
  Tensor logits = device_empty({2, 64}, DType::kF32);
  Tensor ids = device_empty({2, 6}, DType::kI32);
  Tensor w = device_empty({2, 6}, DType::kF32);
  ops::MoeRoutingParams p;
  p.top_k = 6;
  p.method = ops::MoeTopkMethod::kGroupLimitedGreedy;
  p.n_group = 5;  // does not divide 64
  EXPECT_THROW(moe_route(logits, p, ids, w, test_stream()), std::invalid_argument);
  p.method = ops::MoeTopkMethod::kGreedy;
  p.top_k = 7;  // outputs hold 6 per token
  EXPECT_THROW(moe_route(logits, p, ids, w, test_stream()), std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
