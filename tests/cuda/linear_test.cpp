// cuBLASLt linear against a float64 reference on the same (rounded) inputs. The reference is
// computed here rather than through ops::linear so the test binary does not link OpenBLAS
// (it would have to be carried to the GPU machine) and so it is exact to compare against.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/gemm/blaslt.h"

namespace kite::cuda {
namespace {

using namespace testing;

struct LinearCase {
  DType in, out;
  int64_t m, n, k;
  bool bias;
};

class CudaLinearTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(CudaLinearTest, MatchesFloat64Reference) {
  const LinearCase c = GetParam();
  BlasLtContext& ctx = test_blas();
  // Twice with fresh inputs: the second call reuses the cached plan.
  for (int round = 0; round < 2; ++round) {
    auto rng = test_rng();
    rng.discard(round * 1000);
    Tensor x = random_host({c.m, c.k}, rng);
    Tensor w = random_host({c.n, c.k}, rng, -0.1f, 0.1f);
    Tensor b = random_host({c.n}, rng);
    round_to(x, c.in);
    round_to(w, c.in);
    round_to(b, c.out);
    Tensor ref = linear_ref(x, w, c.bias ? &b : nullptr);
    Tensor db = upload(b, c.out);
    Tensor y = device_poisoned({c.m, c.n}, c.out);
    linear(ctx, upload(x, c.in), upload(w, c.in), c.bias ? &db : nullptr, y, test_stream());
    // bf16 in, fp32 out: only accumulation error, so a tighter bound than the bf16 output.
    const double tol = c.out == DType::kBF16 ? kTolBF16 : (c.in == DType::kBF16 ? 1e-3 : kTolF32);
    KITE_EXPECT_CLOSE(download(y), ref, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaLinearTest,
    ::testing::Values(LinearCase{DType::kBF16, DType::kBF16, 1, 512, 256, false},
                      // M <= 8 with K % 8 == 0 take the GEMV kernel (gemm/gemv.h); odd N, a
                      // K that is not a multiple of the unrolled stride, bias, F32 out
                      LinearCase{DType::kBF16, DType::kBF16, 1, 1001, 4104, true},
                      LinearCase{DType::kBF16, DType::kF32, 3, 77, 136, false},
                      LinearCase{DType::kBF16, DType::kBF16, 8, 2048, 1024, false},
                      LinearCase{DType::kBF16, DType::kF32, 7, 129, 8, true},
                      LinearCase{DType::kBF16, DType::kBF16, 2, 64, 260, false},
                      LinearCase{DType::kBF16, DType::kBF16, 37, 384, 200, true},
                      LinearCase{DType::kBF16, DType::kBF16, 128, 1024, 512, false},
                      LinearCase{DType::kBF16, DType::kF32, 5, 320, 256, true},
                      LinearCase{DType::kBF16, DType::kF32, 64, 256, 1024, false},
                      LinearCase{DType::kF32, DType::kF32, 1, 512, 256, false},
                      LinearCase{DType::kF32, DType::kF32, 33, 300, 200, true},
                      LinearCase{DType::kF32, DType::kF32, 128, 256, 768, false}),
    [](const auto& info) {
      const LinearCase& c = info.param;
      return dtype_label(c.in) + "_" + dtype_label(c.out) + "_" + std::to_string(c.m) + "x" +
             std::to_string(c.n) + "x" + std::to_string(c.k) + (c.bias ? "_bias" : "");
    });

TEST(CudaLinear, RejectsBadShapesAndDtypes) {
  BlasLtContext ctx(1 << 20);
  Tensor x = device_empty({2, 64}, DType::kF32);
  Tensor w = device_empty({32, 64}, DType::kF32);
  Tensor w_bad = device_empty({32, 63}, DType::kF32);
  Tensor y = device_empty({2, 32}, DType::kF32);
  Tensor y_bf16 = device_empty({2, 32}, DType::kBF16);
  EXPECT_THROW(linear(ctx, x, w_bad, nullptr, y, test_stream()), std::invalid_argument);
  EXPECT_THROW(linear(ctx, x, w, nullptr, y_bf16, test_stream()), std::invalid_argument);
  Tensor bias_bad = device_empty({31}, DType::kF32);
  EXPECT_THROW(linear(ctx, x, w, &bias_bad, y, test_stream()), std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
