#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "kernel_test_util.h"
#include "kernels/ops.h"

namespace kite {
namespace {

using testing::all_close;
using testing::poisoned;
using testing::random_tensor;

std::vector<double> silu_mul_ref(const Tensor& gate_up) {
  const int64_t inter = gate_up.size(-1) / 2, rows = gate_up.numel() / (2 * inter);
  std::vector<double> out(rows * inter);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < inter; ++j) {
      const double g = gate_up.f32()[r * 2 * inter + j];
      const double u = gate_up.f32()[r * 2 * inter + inter + j];
      out[r * inter + j] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  return out;
}

TEST(SiluMul, MatchesReference) {
  std::mt19937 rng(11);
  for (auto [rows, inter] : {std::pair<int64_t, int64_t>{1, 1}, {1, 37}, {7, 64}, {33, 1000}}) {
    Tensor gate_up = random_tensor({rows, 2 * inter}, rng, -8.0f, 8.0f);
    Tensor out = poisoned({rows, inter});
    ops::silu_mul(gate_up, out);
    EXPECT_TRUE(all_close(out.f32(), silu_mul_ref(gate_up), 1e-5, 1e-7)) << rows << "x" << inter;
  }
}

TEST(SiluMul, AliasedOutputAtStartOfInput) {
  std::mt19937 rng(12);
  Tensor gate_up = random_tensor({5, 2 * 9}, rng, -4.0f, 4.0f);
  const std::vector<double> want = silu_mul_ref(gate_up);
  Tensor out = gate_up.view({5 * 2 * 9}).slice_rows(0, 5 * 9).view({5, 9});
  ops::silu_mul(gate_up, out);
  EXPECT_TRUE(all_close(out.f32(), want, 1e-5, 1e-7));
}

TEST(SiluMul, RejectsOddWidthAndWrongOutput) {
  std::mt19937 rng(13);
  Tensor odd = random_tensor({2, 7}, rng);
  Tensor out = Tensor::empty({2, 3});
  EXPECT_THROW(ops::silu_mul(odd, out), std::invalid_argument);
  Tensor even = random_tensor({2, 8}, rng);
  EXPECT_THROW(ops::silu_mul(even, out), std::invalid_argument);
}

std::vector<double> softmax_ref(const Tensor& x) {
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  std::vector<double> out(x.numel());
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j) max = std::max(max, double(x.f32()[r * cols + j]));
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x.f32()[r * cols + j] - max);
    for (int64_t j = 0; j < cols; ++j)
      out[r * cols + j] = std::exp(x.f32()[r * cols + j] - max) / sum;
  }
  return out;
}

TEST(Softmax, MatchesReference) {
  std::mt19937 rng(21);
  for (const Shape& shape : {Shape{1, 1}, Shape{1, 5}, Shape{4, 64}, Shape{2, 3, 1000}}) {
    Tensor x = random_tensor(shape, rng, -10.0f, 10.0f);
    const std::vector<double> want = softmax_ref(x);
    ops::softmax(x);
    EXPECT_TRUE(all_close(x.f32(), want, 1e-5, 1e-9)) << shape_to_string(shape);
  }
}

TEST(Softmax, StableForLargeLogits) {
  std::mt19937 rng(22);
  Tensor x = random_tensor({3, 50}, rng, 900.0f, 1000.0f);
  const std::vector<double> want = softmax_ref(x);
  ops::softmax(x);
  EXPECT_TRUE(all_close(x.f32(), want, 1e-5, 1e-9));
}

TEST(Embedding, GathersRows) {
  std::mt19937 rng(31);
  Tensor table = random_tensor({50, 24}, rng);
  const std::vector<int32_t> ids = {0, 49, 7, 7, 23};
  Tensor out = poisoned({5, 24});
  ops::embedding(table, ids, out);
  std::vector<double> want;
  for (int32_t id : ids)
    for (int64_t j = 0; j < 24; ++j) want.push_back(table.f32()[id * 24 + j]);
  EXPECT_TRUE(all_close(out.f32(), want, 0.0, 0.0));
}

TEST(Embedding, ThrowsOnIdOutsideVocabulary) {
  std::mt19937 rng(32);
  Tensor table = random_tensor({10, 4}, rng);
  Tensor out = Tensor::zeros({2, 4});
  const std::vector<int32_t> too_big = {1, 10};
  const std::vector<int32_t> negative = {-1, 2};
  EXPECT_THROW(ops::embedding(table, too_big, out), std::out_of_range);
  EXPECT_THROW(ops::embedding(table, negative, out), std::out_of_range);
  for (float v : out.f32()) EXPECT_EQ(v, 0.0f);  // nothing written on failure
  Tensor wrong_out = Tensor::empty({2, 5});
  const std::vector<int32_t> ok = {1, 2};
  EXPECT_THROW(ops::embedding(table, ok, wrong_out), std::invalid_argument);
}

}  // namespace
}  // namespace kite
