#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "kernel_test_util.h"
#include "kernels/ops.h"
#include "support/rope_cos_sin.h"

namespace kite {
namespace {

using test_support::make_cos_sin;
using testing::all_close;
using testing::random_tensor;

// transformers, literally: emb = cat(freqs, freqs); q*cos + rotate_half(q)*sin, where the
// interleaved variant first de-interleaves q (view(d/2, 2).transpose -> [x0,x2,..,x1,x3,..]).
std::vector<double> rope_ref(const Tensor& x, int64_t offset, int64_t rot_dim, const Tensor& cos,
                             const Tensor& sin, ops::RopeStyle style) {
  const int64_t tokens = x.size(0), heads = x.size(1), dim = x.size(2), half = rot_dim / 2;
  std::vector<double> out(x.numel());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = x.data<float>() + (t * heads + h) * dim;
      double* o = out.data() + (t * heads + h) * dim;
      for (int64_t j = 0; j < dim; ++j) o[j] = in[j];
      std::vector<double> q(rot_dim);
      for (int64_t j = 0; j < rot_dim; ++j) {
        q[j] = style == ops::RopeStyle::kNeox
                   ? in[offset + j]
                   : in[offset + (j < half ? 2 * j : 2 * (j - half) + 1)];
      }
      for (int64_t j = 0; j < rot_dim; ++j) {
        const double c = cos.f32()[t * half + j % half], s = sin.f32()[t * half + j % half];
        const double rotated = j < half ? -q[j + half] : q[j - half];
        o[offset + j] = q[j] * c + rotated * s;
      }
    }
  }
  return out;
}

struct RopeCase {
  int64_t tokens, heads, head_dim, offset, rot_dim;
};

class RopeTest : public ::testing::TestWithParam<std::tuple<RopeCase, ops::RopeStyle>> {};

TEST_P(RopeTest, MatchesTransformersFormula) {
  const auto& [c, style] = GetParam();
  std::mt19937 rng(51);
  Tensor x = random_tensor({c.tokens, c.heads, c.head_dim}, rng, -2.0f, 2.0f);
  Tensor cos, sin;
  make_cos_sin(c.tokens, c.rot_dim, rng, cos, sin);
  const std::vector<double> want = rope_ref(x, c.offset, c.rot_dim, cos, sin, style);
  const Tensor before = x.clone();
  ops::rope(x, c.offset, c.rot_dim, cos, sin, style);
  EXPECT_TRUE(all_close(x.f32(), want, 1e-5, 1e-6));
  // Dims outside the rotary range are untouched, bit for bit.
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t j = i % c.head_dim;
    if (j < c.offset || j >= c.offset + c.rot_dim) {
      ASSERT_EQ(x.f32()[i], before.f32()[i]) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeTest,
    ::testing::Combine(::testing::Values(RopeCase{1, 1, 2, 0, 2}, RopeCase{1, 4, 64, 0, 64},
                                         RopeCase{5, 3, 128, 0, 64},    // partial rotary
                                         RopeCase{7, 2, 192, 128, 64},  // MLA: rope at the end
                                         RopeCase{3, 2, 96, 16, 48}),
                       ::testing::Values(ops::RopeStyle::kNeox, ops::RopeStyle::kInterleaved)));

// DeepSeek-V2's complex form keeps pairs interleaved; kInterleaved writes them half-split.
// Both must give the same q·k, which is all attention consumes.
TEST(Rope, InterleavedMatchesComplexFormDotProducts) {
  std::mt19937 rng(52);
  const int64_t dim = 64, half = 32;
  Tensor q = random_tensor({2, 1, dim}, rng), k = random_tensor({2, 1, dim}, rng);
  Tensor cos, sin;
  make_cos_sin(2, dim, rng, cos, sin);
  auto complex_form = [&](const Tensor& x, int64_t t) {
    std::vector<double> out(dim);
    for (int64_t i = 0; i < half; ++i) {
      const double a = x.f32()[t * dim + 2 * i], b = x.f32()[t * dim + 2 * i + 1];
      const double c = cos.f32()[t * half + i], s = sin.f32()[t * half + i];
      out[2 * i] = a * c - b * s;
      out[2 * i + 1] = a * s + b * c;
    }
    return out;
  };
  const std::vector<double> q_c = complex_form(q, 0), k_c = complex_form(k, 1);
  ops::rope(q, 0, dim, cos, sin, ops::RopeStyle::kInterleaved);
  ops::rope(k, 0, dim, cos, sin, ops::RopeStyle::kInterleaved);
  double dot_complex = 0, dot_ours = 0;
  for (int64_t i = 0; i < dim; ++i) {
    dot_complex += q_c[i] * k_c[i];
    dot_ours += double(q.f32()[i]) * k.f32()[dim + i];
  }
  EXPECT_NEAR(dot_ours, dot_complex, 1e-5 * (1 + std::fabs(dot_complex)));
}

TEST(Rope, RejectsBadRanges) {
  std::mt19937 rng(53);
  Tensor x = random_tensor({2, 1, 8}, rng);
  Tensor cos, sin;
  make_cos_sin(2, 4, rng, cos, sin);
  EXPECT_THROW(ops::rope(x, 6, 4, cos, sin, ops::RopeStyle::kNeox), std::invalid_argument);
  EXPECT_THROW(ops::rope(x, 0, 3, cos, sin, ops::RopeStyle::kNeox), std::invalid_argument);
  EXPECT_THROW(ops::rope(x, 0, 8, cos, sin, ops::RopeStyle::kNeox), std::invalid_argument);
  Tensor flat = random_tensor({2, 8}, rng);
  EXPECT_THROW(ops::rope(flat, 0, 4, cos, sin, ops::RopeStyle::kNeox), std::invalid_argument);
}

}  // namespace
}  // namespace kite
