#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops.h"

namespace kite {
namespace {

using testing::all_close;
using testing::poisoned;
using testing::random_tensor;

std::vector<double> rms_norm_ref(const Tensor& x, const Tensor& w, double eps) {
  const int64_t h = x.size(-1), rows = x.numel() / h;
  std::vector<double> out(x.numel());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += double(x.f32()[r * h + j]) * x.f32()[r * h + j];
    const double inv = 1.0 / std::sqrt(ss / h + eps);
    for (int64_t j = 0; j < h; ++j) out[r * h + j] = x.f32()[r * h + j] * inv * w.f32()[j];
  }
  return out;
}

struct NormCase {
  Shape shape;
  float eps;
  float scale;  // magnitude of the inputs; small values make eps matter
};

class RmsNormTest : public ::testing::TestWithParam<NormCase> {};

TEST_P(RmsNormTest, MatchesReference) {
  const NormCase& c = GetParam();
  std::mt19937 rng(3);
  Tensor x = random_tensor(c.shape, rng, -c.scale, c.scale);
  Tensor w = random_tensor({c.shape.back()}, rng, 0.5f, 1.5f);
  Tensor out = poisoned(c.shape);
  ops::rms_norm(x, w, c.eps, out);
  EXPECT_TRUE(all_close(out.f32(), rms_norm_ref(x, w, c.eps), 1e-5, 1e-7));
}

TEST_P(RmsNormTest, InPlaceMatchesOutOfPlace) {
  const NormCase& c = GetParam();
  std::mt19937 rng(4);
  Tensor x = random_tensor(c.shape, rng, -c.scale, c.scale);
  Tensor w = random_tensor({c.shape.back()}, rng, 0.5f, 1.5f);
  const std::vector<double> want = rms_norm_ref(x, w, c.eps);
  ops::rms_norm(x, w, c.eps, x);
  EXPECT_TRUE(all_close(x.f32(), want, 1e-5, 1e-7));
}

TEST_P(RmsNormTest, AddRmsNormUpdatesResidualAndNormalises) {
  const NormCase& c = GetParam();
  std::mt19937 rng(5);
  Tensor residual = random_tensor(c.shape, rng, -c.scale, c.scale);
  Tensor x = random_tensor(c.shape, rng, -c.scale, c.scale);
  Tensor w = random_tensor({c.shape.back()}, rng, 0.5f, 1.5f);
  Tensor sum = Tensor::empty(c.shape);
  for (int64_t i = 0; i < x.numel(); ++i) sum.f32()[i] = residual.f32()[i] + x.f32()[i];
  Tensor out = poisoned(c.shape);
  ops::add_rms_norm(residual, x, w, c.eps, out);
  EXPECT_TRUE(all_close(residual.f32(), testing::to_double(sum.f32()), 0.0, 0.0));
  EXPECT_TRUE(all_close(out.f32(), rms_norm_ref(sum, w, c.eps), 1e-5, 1e-7));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RmsNormTest,
    ::testing::Values(NormCase{{1, 1}, 1e-6f, 1.0f}, NormCase{{3, 7}, 1e-5f, 2.0f},
                      NormCase{{2, 4, 33}, 1e-6f, 1.0f}, NormCase{{5, 4096}, 1e-6f, 30.0f},
                      NormCase{{64, 512}, 1e-6f, 1.0f}, NormCase{{4, 16}, 1e-2f, 0.05f}));

TEST(RmsNorm, RejectsWrongWeightSize) {
  std::mt19937 rng(1);
  Tensor x = random_tensor({2, 8}, rng);
  Tensor w = random_tensor({7}, rng);
  Tensor out = Tensor::empty({2, 8});
  EXPECT_THROW(ops::rms_norm(x, w, 1e-6f, out), std::invalid_argument);
  Tensor residual = random_tensor({2, 9}, rng);
  Tensor w8 = random_tensor({8}, rng);
  EXPECT_THROW(ops::add_rms_norm(residual, x, w8, 1e-6f, out), std::invalid_argument);
}

// Backend::rms_norm_prefix (the default the CPU backend uses): the first `width` columns of
// each row normalised with the width's weight, the others left bit for bit.
TEST(RmsNormPrefix, NormalisesTheLeadingColumnsOnly) {
  std::mt19937 rng(11);
  const int64_t rows = 3, cols = 13, width = 9;
  Tensor x = random_tensor({rows, cols}, rng, -2.0f, 2.0f);
  Tensor w = random_tensor({width}, rng, 0.5f, 1.5f);
  Tensor before = x.clone();
  Tensor lead = Tensor::empty({rows, width});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) lead.f32()[r * width + j] = x.f32()[r * cols + j];
  const std::vector<double> ref = rms_norm_ref(lead, w, 1e-6);
  make_cpu_backend()->rms_norm_prefix(x, width, w, 1e-6f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; ++j)
      EXPECT_NEAR(x.f32()[r * cols + j], ref[r * width + j], 1e-5) << r << "," << j;
    for (int64_t j = width; j < cols; ++j)
      EXPECT_EQ(x.f32()[r * cols + j], before.f32()[r * cols + j]) << r << "," << j;
  }
  EXPECT_THROW(make_cpu_backend()->rms_norm_prefix(x, cols + 1, w, 1e-6f), std::invalid_argument);
  EXPECT_THROW(make_cpu_backend()->rms_norm_prefix(x, width - 1, w, 1e-6f), std::invalid_argument);
}

}  // namespace
}  // namespace kite
