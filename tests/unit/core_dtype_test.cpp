#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/tensor.h"

namespace kite {

TEST(DType, Bf16RoundTripIsNearestEven) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-100.f, 100.f);
  for (int i = 0; i < 1000; ++i) {
    float x = u(rng);
    float y = bf16_to_f32(f32_to_bf16(x));
    EXPECT_LE(std::fabs(x - y), std::fabs(x) / 128.0f);
  }
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16RoundTrip) {
  for (float x : {0.0f, 1.0f, -1.5f, 65504.0f, 6.1e-5f, 1e-7f, 3.14159f}) {
    float y = f16_to_f32(f32_to_f16(x));
    EXPECT_NEAR(x, y, std::fabs(x) / 1024.0f + 6e-8f) << x;
  }
}

TEST(DType, Fp8E4M3KnownCodes) {
  EXPECT_EQ(fp8e4m3_to_f32(0x38), 1.0f);    // exp 7, mant 0
  EXPECT_EQ(fp8e4m3_to_f32(0x7e), 448.0f);  // max finite
  EXPECT_EQ(fp8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8e4m3_to_f32(0x7f)));
  EXPECT_EQ(f32_to_fp8e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_fp8e4m3(-1.0f), 0xb8);
  for (int c = 0; c < 0x7f; ++c)
    EXPECT_EQ(f32_to_fp8e4m3(fp8e4m3_to_f32(static_cast<uint8_t>(c))), c);
}

TEST(Tensor, ViewSliceClone) {
  Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor r = t.slice_rows(1, 3);
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.data<float>()[0], 3.0f);
  Tensor c = r.clone();
  c.data<float>()[0] = 9;
  EXPECT_EQ(t.data<float>()[2], 3.0f);
  EXPECT_THROW(t.view({4}), std::invalid_argument);
}

}  // namespace kite
