#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/blas_setup.h"
#include "kernels/ops.h"

namespace kite {
namespace {

using testing::all_close;
using testing::poisoned;
using testing::random_tensor;

struct LinearCase {
  Shape x_shape;
  int64_t n;
  bool with_bias;
};

class LinearTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearTest, MatchesDoubleReference) {
  const LinearCase& c = GetParam();
  std::mt19937 rng(7);
  Tensor x = random_tensor(c.x_shape, rng);
  const int64_t k = x.size(-1);
  const int64_t m = x.numel() / k;
  Tensor w = random_tensor({c.n, k}, rng);
  Tensor b = random_tensor({c.n}, rng);
  Shape y_shape = c.x_shape;
  y_shape.back() = c.n;
  Tensor y = poisoned(y_shape);
  ops::linear(x, w, c.with_bias ? &b : nullptr, y);

  // fp32 dot products err in proportion to sum |x_k w_k|, not to the (possibly tiny) result.
  std::vector<double> want(m * c.n), atol(m * c.n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = c.with_bias ? b.f32()[j] : 0.0, mag = std::fabs(acc);
      for (int64_t p = 0; p < k; ++p) {
        const double term = double(x.f32()[i * k + p]) * w.f32()[j * k + p];
        acc += term;
        mag += std::fabs(term);
      }
      want[i * c.n + j] = acc;
      atol[i * c.n + j] = 1e-6 * mag + 1e-7;
    }
  }
  EXPECT_TRUE(all_close(y.f32(), want, 1e-5, 0.0, atol));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Values(LinearCase{{1, 1}, 1, false}, LinearCase{{1, 64}, 33, true},
                      LinearCase{{1, 1024}, 7, false}, LinearCase{{3, 17}, 5, true},
                      LinearCase{{64, 128}, 96, false}, LinearCase{{2, 3, 40}, 24, true},
                      LinearCase{{65, 257}, 129, true}));

TEST(Linear, RejectsMismatchedShapes) {
  std::mt19937 rng(1);
  Tensor x = random_tensor({2, 8}, rng);
  Tensor w = random_tensor({4, 9}, rng);
  Tensor y = Tensor::empty({2, 4});
  EXPECT_THROW(ops::linear(x, w, nullptr, y), std::invalid_argument);
  Tensor w_ok = random_tensor({4, 8}, rng);
  Tensor y_bad = Tensor::empty({2, 5});
  EXPECT_THROW(ops::linear(x, w_ok, nullptr, y_bad), std::invalid_argument);
  Tensor bias_bad = random_tensor({3}, rng);
  EXPECT_THROW(ops::linear(x, w_ok, &bias_bad, y), std::invalid_argument);
  Tensor w_bf16 = Tensor::empty({4, 8}, DType::kBF16);
  EXPECT_THROW(ops::linear(x, w_bf16, nullptr, y), std::invalid_argument);
}

// OpenBLAS 0.3.21 misdetects recent Xeons as "Prescott" (SSE3, ~3.5x slower sgemm); kite
// must have switched to vector kernels by the time linear() has run.
TEST(Linear, UsesVectorBlasKernelsOnAvx2Cpus) {
  std::mt19937 rng(2);
  Tensor x = random_tensor({2, 8}, rng), w = random_tensor({4, 8}, rng);
  Tensor y = Tensor::empty({2, 4});
  ops::linear(x, w, nullptr, y);
  const std::string core = ops::cpu::blas_core_name();
  __builtin_cpu_init();
  if (core == "unknown" || std::getenv("OPENBLAS_CORETYPE") || !__builtin_cpu_supports("avx2")) {
    GTEST_SKIP() << "not OpenBLAS, a user-chosen core, or no AVX2 (core " << core << ")";
  }
  for (const char* slow : {"Prescott", "Core2", "Nehalem", "Sandybridge", "Unknown"})
    EXPECT_NE(core, slow);
}

// A BLAS call too small to gain from a team runs on one thread (OpenBLAS's OpenMP build sizes
// its team by omp_get_max_threads()); a large one keeps the count; the count comes back after.
TEST(Linear, SmallBlasCallsRunOnOneThread) {
  const int threads = omp_get_max_threads();
  if (threads < 2) GTEST_SKIP() << "one OpenMP thread: nothing to change";
  {
    const ops::cpu::BlasThreadsFor small(256 * 768);
    EXPECT_EQ(omp_get_max_threads(), 1);
  }
  EXPECT_EQ(omp_get_max_threads(), threads);
  {
    const ops::cpu::BlasThreadsFor large(int64_t{896} * 4864);
    EXPECT_EQ(omp_get_max_threads(), threads);
  }
  EXPECT_EQ(omp_get_max_threads(), threads);
}

}  // namespace
}  // namespace kite
