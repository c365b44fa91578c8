#include "kernels/cuda/sampling/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cuda_test_util.h"

namespace kite::cuda {
namespace {

using namespace testing;

// First index of the maximum, NaN ignored (0 for a row of NaN).
int32_t cpu_argmax(const float* row, int64_t n) {
  int32_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isnan(row[i]) && (best < 0 || row[i] > row[best])) best = static_cast<int32_t>(i);
  return best < 0 ? 0 : best;
}

class CudaGreedyTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(CudaGreedyTest, MatchesCpuArgmaxWithTiesToLowestId) {
  const auto [dtype, vocab] = GetParam();
  auto rng = test_rng();
  const int64_t rows = 6;
  Tensor logits = random_host({rows, vocab}, rng, -10.0f, 10.0f);
  float* l = logits.data<float>();
  // Row 1: the maximum twice (lowest id must win); row 2: NaN early plus a maximum at the end;
  // row 3: the maximum at id 0; rows 4-5: all equal (id 0).
  l[1 * vocab + 7] = 50.0f;
  l[1 * vocab + vocab - 3] = 50.0f;
  l[2 * vocab + 1] = std::numeric_limits<float>::quiet_NaN();
  l[2 * vocab + vocab - 1] = 60.0f;
  l[3 * vocab] = 70.0f;
  for (int64_t i = 0; i < vocab; ++i) l[4 * vocab + i] = l[5 * vocab + i] = 1.5f;
  round_to(logits, dtype);
  Tensor ids = device_poisoned({rows}, DType::kI32);
  greedy_sample(upload(logits, dtype), ids, test_stream());
  Tensor got = to_host(ids, test_stream());
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(got.data<int32_t>()[r], cpu_argmax(l + r * vocab, vocab)) << "row " << r;
  EXPECT_EQ(got.data<int32_t>()[1], 7);
  EXPECT_EQ(got.data<int32_t>()[2], vocab - 1);

  // row_ok: 0 for the NaN row, for a +inf row and for an all -inf row; 1 for the others.
  const float inf = std::numeric_limits<float>::infinity();
  l[3 * vocab + vocab / 2] = inf;
  for (int64_t i = 0; i < vocab; ++i) l[4 * vocab + i] = -inf;
  round_to(logits, dtype);
  Tensor ok = device_poisoned({rows}, DType::kI32);
  greedy_sample(upload(logits, dtype), ids, test_stream(), &ok);
  Tensor ok_host = to_host(ok, test_stream());
  const int32_t want[] = {1, 1, 0, 0, 0, 1};
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(ok_host.data<int32_t>()[r], want[r]) << "row " << r;
}

// 151936 (Qwen2), 129280 (DeepSeek-V3), 16384 (kite-tiny), 1001 (not a vector multiple), 12
// (fewer vectors than the cluster has blocks).
INSTANTIATE_TEST_SUITE_P(Vocabs, CudaGreedyTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(151936, 129280, 16384, 1001,
                                                                       12)));

}  // namespace
}  // namespace kite::cuda
