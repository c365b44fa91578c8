#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"

namespace kite::cuda {
namespace {

using namespace testing;

class CudaSiluMulTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t>> {};

TEST_P(CudaSiluMulTest, MatchesCpu) {
  const auto [dtype, rows, inter] = GetParam();
  auto rng = test_rng();
  Tensor gate_up = random_host({rows, 2 * inter}, rng, -6.0f, 6.0f);
  round_to(gate_up, dtype);
  Tensor ref = Tensor::empty({rows, inter});
  ops::silu_mul(gate_up, ref);
  Tensor out = device_poisoned({rows, inter}, dtype);
  silu_mul(upload(gate_up, dtype), out, test_stream());
  KITE_EXPECT_CLOSE(download(out), ref, tolerance(dtype));
}

// 1408 (DeepSeek-V2-Lite expert), 18944 (Qwen2-7B), 100 (scalar path).
INSTANTIATE_TEST_SUITE_P(Shapes, CudaSiluMulTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 17),
                                            ::testing::Values<int64_t>(1408, 18944, 100)));

TEST(CudaSiluMul, RejectsOverlap) {
  Tensor gate_up = device_empty({4, 64}, DType::kF32);
  Tensor out = gate_up.view({4 * 64}).slice_rows(0, 128).view({4, 32});
  EXPECT_THROW(silu_mul(gate_up, out, test_stream()), std::invalid_argument);
}

class CudaEmbeddingTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(CudaEmbeddingTest, MatchesCpu) {
  const auto [dtype, hidden] = GetParam();
  auto rng = test_rng();
  const int64_t vocab = 1000;
  Tensor table = random_host({vocab, hidden}, rng);
  round_to(table, dtype);
  std::vector<int32_t> ids = {0, static_cast<int32_t>(vocab - 1)};
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  for (int i = 0; i < 40; ++i) ids.push_back(pick(rng));
  const auto tokens = static_cast<int64_t>(ids.size());
  Tensor ref = Tensor::empty({tokens, hidden});
  ops::embedding(table, ids, ref);
  Tensor out = device_poisoned({tokens, hidden}, dtype);
  embedding(upload(table, dtype), to_device(std::span<const int32_t>(ids), {tokens}, test_stream()),
            out, test_stream());
  // A lookup is a copy: exact.
  Tensor got = download(out);
  EXPECT_EQ(std::memcmp(got.raw(), ref.raw(), ref.size_bytes()), 0);
  EXPECT_EQ(rel_error(got, ref), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaEmbeddingTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(256, 100, 7168)));

TEST(CudaEmbedding, OutOfRangeIdGivesNanRowOnly) {
  auto rng = test_rng();
  Tensor table = random_host({10, 64}, rng);
  const std::vector<int32_t> ids = {3, 10, -1, 9};
  Tensor out = device_poisoned({4, 64}, DType::kF32);
  embedding(upload(table, DType::kF32),
            to_device(std::span<const int32_t>(ids), {4}, test_stream()), out, test_stream());
  Tensor got = download(out);
  const float* g = got.data<float>();
  EXPECT_EQ(std::memcmp(g, table.data<float>() + 3 * 64, 64 * 4), 0);
  EXPECT_TRUE(all_nan(g + 64, 64));
  EXPECT_TRUE(all_nan(g + 128, 64));
  EXPECT_EQ(std::memcmp(g + 192, table.data<float>() + 9 * 64, 64 * 4), 0);
}

}  // namespace
}  // namespace kite::cuda
