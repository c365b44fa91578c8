// The CUDA kernels' multiply-and-shift division (kernels/cuda/fast_divmod.h) is plain
// arithmetic, so it is checked here on the CPU against the division operator.
#include "kernels/cuda/fast_divmod.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace kite {
namespace {

using cuda::FastDivmod;

void expect_divides(int32_t d, int32_t n) {
  const FastDivmod f(d);
  int32_t q = -1, r = -1;
  f.divmod(n, q, r);
  ASSERT_EQ(q, n / d) << n << " / " << d;
  ASSERT_EQ(r, n % d) << n << " % " << d;
}

TEST(FastDivmod, MatchesDivisionAtTheEdgesOfEveryDivisorUpTo4096) {
  constexpr int32_t kMax = 0x7fffffff;
  for (int32_t d = 1; d <= 4096; ++d) {
    for (int32_t n : {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, kMax - 1, kMax})
      expect_divides(d, n);
    // Around large multiples of d, where the rounding of the multiplier shows first.
    for (int32_t k : {kMax / d, kMax / d - 1, kMax / (2 * d)})
      for (int32_t delta : {-1, 0, 1}) {
        const int64_t n = int64_t{k} * d + delta;
        if (n >= 0 && n <= kMax) expect_divides(d, static_cast<int32_t>(n));
      }
  }
}

TEST(FastDivmod, MatchesDivisionOnRandomOperands) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any(0, 0x7fffffff);
  std::uniform_int_distribution<int32_t> small(1, 1 << 16);
  for (int i = 0; i < 200000; ++i) {
    expect_divides(small(rng), any(rng));
    expect_divides(1 + any(rng) % 0x7ffffffe, any(rng));
  }
  for (int32_t d : {0x40000000, 0x40000001, 0x7ffffffe, 0x7fffffff, 3 << 29})
    for (int32_t n : {0, d - 1, d, 0x7fffffff}) expect_divides(d, n);
}

TEST(FastDivmod, EveryNumeratorBelowAMillionForTheShapesKernelsUse) {
  // The MoE kernels divide by per-expert group counts, chunk counts and top_k.
  for (int32_t d : {1, 2, 3, 6, 8, 64, 256, 352, 704, 1408, 3584}) {
    const FastDivmod f(d);
    for (int32_t n = 0; n < 1000000; ++n) ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  }
}

}  // namespace
}  // namespace kite
