// quantized_linear against float64 references that apply each format's documented arithmetic
// (integer / FP8 codes and scales) directly, on random inputs with partial blocks and groups.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "../kernels/kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/quant_ops.h"
#include "quant/activation_scale.h"
#include "quant/quantized_weight.h"

namespace kite {
namespace {

using testing::all_close;
using testing::random_tensor;

double fp8_value(double v) { return fp8e4m3_to_f32(f32_to_fp8e4m3(static_cast<float>(v))); }

// Per-row (or per-group) activation quantization in double: returns the decoded values. The
// codes are of v * (1 / s) in fp32 (quant/activation_scale.h).
std::vector<double> ref_act_fp8(const Tensor& x, int64_t group) {
  const int64_t m = x.size(0), k = x.size(1);
  std::vector<double> out(m * k);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c0 = 0; c0 < k; c0 += group) {
      const int64_t c1 = std::min(k, c0 + group);
      double amax = 0;
      for (int64_t i = c0; i < c1; ++i)
        amax = std::max(amax, std::fabs((double)x.f32()[r * k + i]));
      const float s = static_cast<float>(amax) / 448.0f, inv = 1.0f / s;
      for (int64_t i = c0; i < c1; ++i) out[r * k + i] = fp8_value(x.f32()[r * k + i] * inv) * s;
    }
  return out;
}

std::vector<double> ref_matmul(const std::vector<double>& a, const std::vector<double>& w,
                               int64_t m, int64_t n, int64_t k, const Tensor* bias) {
  std::vector<double> y(m * n);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double s = bias ? bias->f32()[c] : 0.0;
      for (int64_t i = 0; i < k; ++i) s += a[r * k + i] * w[c * k + i];
      y[r * n + c] = s;
    }
  return y;
}

Tensor run(const Tensor& x, const QuantizedWeight& q, const Tensor* bias) {
  EXPECT_TRUE(q.validate().ok()) << q.validate().message();
  Tensor y = testing::poisoned({x.size(0), q.out_features});
  ops::quantized_linear(x, q, bias, y);
  return y;
}

// Relative Frobenius distance between a result and the fp32 linear: quantization must stay
// close to the unquantized layer (catches a scale applied twice or a wrong nibble order).
double rel_to_fp32(const Tensor& y, const Tensor& x, const Tensor& w) {
  Tensor ref = Tensor::empty({x.size(0), w.size(0)});
  ops::linear(x, w, nullptr, ref);
  double num = 0, den = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    num += std::pow(y.f32()[i] - ref.f32()[i], 2);
    den += std::pow(ref.f32()[i], 2);
  }
  return std::sqrt(num / den);
}

TEST(QuantLinear, Fp8PerChannelMatchesFloat64Reference) {
  std::mt19937 rng(1);
  const int64_t m = 5, n = 40, k = 300;
  Tensor x = random_tensor({m, k}, rng, -3.0f, 3.0f), w = random_tensor({n, k}, rng);
  Tensor bias = random_tensor({n}, rng);
  QuantizedWeight q = quantize_fp8_per_channel(w);
  std::vector<double> wd(n * k);
  for (int64_t r = 0; r < n; ++r) {
    double amax = 0;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs((double)w.f32()[r * k + i]));
    const float s = static_cast<float>(amax) / 448.0f;
    for (int64_t i = 0; i < k; ++i) wd[r * k + i] = fp8_value(w.f32()[r * k + i] / s) * s;
  }
  Tensor y = run(x, q, &bias);
  EXPECT_TRUE(all_close(y.f32(), ref_matmul(ref_act_fp8(x, k), wd, m, n, k, &bias), 1e-5, 1e-4));
  EXPECT_LT(rel_to_fp32(y, x, w), 0.06);
}

TEST(QuantLinear, Fp8BlockMatchesFloat64Reference) {
  std::mt19937 rng(2);
  const int64_t m = 3, n = 200, k = 300;  // partial blocks on both edges
  Tensor x = random_tensor({m, k}, rng, -2.0f, 2.0f), w = random_tensor({n, k}, rng);
  for (int64_t i = 0; i < k; ++i) x.f32()[i] *= (i < 128 ? 10.0f : 0.1f);  // groups differ
  QuantizedWeight q = quantize_fp8_block(w, 128, 128);
  ASSERT_EQ(q.scales.shape(), (Shape{2, 3}));
  std::vector<double> wd(n * k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const float s = q.scales.f32()[(r / 128) * 3 + i / 128];
      wd[r * k + i] = fp8e4m3_to_f32(q.codes.data<uint8_t>()[r * k + i]) * (double)s;
      EXPECT_NEAR(wd[r * k + i], w.f32()[r * k + i], std::fabs(w.f32()[r * k + i]) / 16 + 1e-6);
    }
  Tensor y = run(x, q, nullptr);
  EXPECT_TRUE(
      all_close(y.f32(), ref_matmul(ref_act_fp8(x, 128), wd, m, n, k, nullptr), 1e-5, 1e-4));
  EXPECT_LT(rel_to_fp32(y, x, w), 0.06);
}

TEST(QuantLinear, Int8WithInputScaleMatchesFloat64Reference) {
  std::mt19937 rng(3);
  const int64_t m = 4, n = 33, k = 70;
  Tensor x = random_tensor({m, k}, rng, -5.0f, 5.0f), w = random_tensor({n, k}, rng);
  Tensor inv_s = random_tensor({k}, rng, 0.2f, 2.0f);
  QuantizedWeight q = quantize_int8_per_channel(w);
  q.input_scale = inv_s;
  std::vector<double> a(m * k), wd(n * k);
  for (int64_t r = 0; r < m; ++r) {
    double amax = 0;
    for (int64_t i = 0; i < k; ++i)
      amax = std::max(amax, std::fabs((double)(x.f32()[r * k + i] * inv_s.f32()[i])));
    const float s = static_cast<float>(amax) / 127.0f, inv = 1.0f / s;
    for (int64_t i = 0; i < k; ++i)
      a[r * k + i] = std::nearbyint((x.f32()[r * k + i] * inv_s.f32()[i]) * inv) * s;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const int c = q.codes.data<int8_t>()[r * k + i];
      ASSERT_LE(std::abs(c), 127);
      wd[r * k + i] = c * (double)q.scales.f32()[r];
      EXPECT_NEAR(wd[r * k + i], w.f32()[r * k + i], q.scales.f32()[r] * 0.5001);
    }
  Tensor y = run(x, q, nullptr);
  EXPECT_TRUE(all_close(y.f32(), ref_matmul(a, wd, m, n, k, nullptr), 1e-5, 1e-4));
}

TEST(QuantLinear, Int4GroupDecodesWithinHalfAStepAndMatches) {
  std::mt19937 rng(4);
  const int64_t m = 3, n = 17, k = 300;  // 3 groups of 128, the last partial; odd n
  Tensor x = random_tensor({m, k}, rng), w = random_tensor({n, k}, rng, -0.5f, 1.5f);
  QuantizedWeight q = quantize_int4_group(w, 128);
  ASSERT_EQ(q.scales.shape(), (Shape{n, 3}));
  std::vector<double> wd(n * k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const uint8_t byte = q.codes.data<uint8_t>()[r * 150 + i / 2];
      const int code = i % 2 ? byte >> 4 : byte & 15;
      const int64_t g = i / 128;
      const double s = q.scales.f32()[r * 3 + g];
      wd[r * k + i] = (code - q.zeros.data<uint8_t>()[r * 3 + g]) * s;
      EXPECT_NEAR(wd[r * k + i], w.f32()[r * k + i], s * 0.5001 + 1e-6);
    }
  std::vector<double> xd(x.f32().begin(), x.f32().end());
  Tensor y = run(x, q, nullptr);
  EXPECT_TRUE(all_close(y.f32(), ref_matmul(xd, wd, m, n, k, nullptr), 1e-5, 1e-4));
  EXPECT_LT(rel_to_fp32(y, x, w), 0.1);
}

TEST(QuantLinear, Int4ActOrderGroupIndexIsHonoured) {
  std::mt19937 rng(5);
  const int64_t n = 8, k = 256;
  Tensor w = random_tensor({n, k}, rng);
  QuantizedWeight q = quantize_int4_group(w, 128);
  // Reverse the group assignment: channel i now reads group 1 - i/128's scale and zero.
  q.g_idx = Tensor::empty({k}, DType::kI32);
  for (int64_t i = 0; i < k; ++i) q.g_idx.data<int32_t>()[i] = static_cast<int32_t>(1 - i / 128);
  ASSERT_TRUE(q.validate().ok());
  Tensor d = q.dequantize();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const uint8_t byte = q.codes.data<uint8_t>()[r * 128 + i / 2];
      const int code = i % 2 ? byte >> 4 : byte & 15;
      const int64_t g = 1 - i / 128;
      ASSERT_FLOAT_EQ(d.f32()[r * k + i],
                      (code - q.zeros.data<uint8_t>()[r * 2 + g]) * q.scales.f32()[r * 2 + g]);
    }
}

// The INT4 decode (vectorised where 16 channels of one group lie side by side) gives every
// channel exactly (q - zero) * scale of its own group: random codes, zeros and scales, group
// sizes that start groups on odd channels (7, 33) or span the whole row, odd and even K, and
// row ranges that start past row 0.
TEST(QuantLinear, Int4DecodeGivesEachChannelItsGroupValueExactly) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255), nibble(0, 15);
  std::uniform_real_distribution<float> scale(1e-3f, 2.0f);
  for (int64_t k : {1, 15, 16, 17, 48, 301, 1000})
    for (int64_t group : {7, 16, 33, 128, 1024}) {
      const int64_t n = 5, groups = (k + group - 1) / group;
      QuantizedWeight q = empty_int4_group(n, k, group);
      for (int64_t i = 0; i < q.codes.numel(); ++i)
        q.codes.data<uint8_t>()[i] = static_cast<uint8_t>(byte(rng));
      for (int64_t i = 0; i < n * groups; ++i) {
        q.scales.f32()[i] = scale(rng);
        q.zeros.data<uint8_t>()[i] = static_cast<uint8_t>(nibble(rng));
      }
      ASSERT_TRUE(q.validate().ok());
      std::vector<float> d(static_cast<size_t>(3 * k));
      q.dequantize_rows(2, 5, d.data());
      for (int64_t r = 2; r < 5; ++r)
        for (int64_t i = 0; i < k; ++i) {
          const uint8_t b = q.codes.data<uint8_t>()[r * ((k + 1) / 2) + i / 2];
          const int code = i % 2 ? b >> 4 : b & 15;
          const int64_t g = r * groups + i / group;
          ASSERT_EQ(d[(r - 2) * k + i],
                    static_cast<float>(code - q.zeros.data<uint8_t>()[g]) * q.scales.f32()[g])
              << "K " << k << " group " << group << " row " << r << " channel " << i;
        }
    }
}

// FP8 (per channel and per 128 x 128 block) and INT8 codes decode to exactly table / integer
// value times their scale, bit for bit, on the vectorised runs and their tails: every code value
// (FP8's NaNs included, compared as bits), K of 1 to 301, rows past 0.
TEST(QuantLinear, EightBitDecodeGivesEachCodeItsValueExactly) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 2.0f);
  const float* table = fp8e4m3_table();
  for (QuantFormat f :
       {QuantFormat::kFp8PerChannel, QuantFormat::kFp8Block, QuantFormat::kInt8PerChannel})
    for (int64_t k : {1, 7, 8, 9, 130, 301}) {
      const int64_t n = 140;  // two FP8 row blocks
      QuantizedWeight q;
      q.format = f;
      q.out_features = n;
      q.in_features = k;
      q.codes =
          Tensor::empty({n, k}, f == QuantFormat::kInt8PerChannel ? DType::kI8 : DType::kF8E4M3);
      for (int64_t i = 0; i < n * k; ++i)
        q.codes.data<uint8_t>()[i] = static_cast<uint8_t>(byte(rng));
      const int64_t bc = (k + 127) / 128;
      q.scales = f == QuantFormat::kFp8Block ? Tensor::empty({2, bc}) : Tensor::empty({n});
      for (float& v : q.scales.f32()) v = scale(rng);
      ASSERT_TRUE(q.validate().ok());
      std::vector<float> d(static_cast<size_t>(3 * k));
      q.dequantize_rows(127, 130, d.data());
      for (int64_t r = 127; r < 130; ++r)
        for (int64_t i = 0; i < k; ++i) {
          const uint8_t c = q.codes.data<uint8_t>()[r * k + i];
          const float want = f == QuantFormat::kInt8PerChannel
                                 ? static_cast<float>(static_cast<int8_t>(c)) * q.scales.f32()[r]
                             : f == QuantFormat::kFp8PerChannel
                                 ? table[c] * q.scales.f32()[r]
                                 : table[c] * q.scales.f32()[(r / 128) * bc + i / 128];
          ASSERT_EQ(std::bit_cast<uint32_t>(d[(r - 127) * k + i]), std::bit_cast<uint32_t>(want))
              << quant_format_name(f) << " K " << k << " row " << r << " channel " << i;
        }
    }
}

TEST(QuantLinear, StackedRowsEqualSeparateLinears) {
  std::mt19937 rng(6);
  Tensor x = random_tensor({4, 256}, rng), a = random_tensor({24, 256}, rng),
         b = random_tensor({40, 256}, rng);
  for (auto quantize : {quantize_int8_per_channel, quantize_fp8_per_channel}) {
    auto stacked = stack_quantized_rows({quantize(a), quantize(b)});
    ASSERT_TRUE(stacked.ok());
    Tensor y = run(x, *stacked, nullptr), ya = run(x, quantize(a), nullptr),
           yb = run(x, quantize(b), nullptr);
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 24; ++c) EXPECT_FLOAT_EQ(y.f32()[r * 64 + c], ya.f32()[r * 24 + c]);
      for (int64_t c = 0; c < 40; ++c)
        EXPECT_FLOAT_EQ(y.f32()[r * 64 + 24 + c], yb.f32()[r * 40 + c]);
    }
  }
  auto i4 = stack_quantized_rows({quantize_int4_group(a, 128), quantize_int4_group(b, 128)});
  ASSERT_TRUE(i4.ok());
  Tensor d = i4->dequantize(), da = quantize_int4_group(a, 128).dequantize();
  for (int64_t i = 0; i < da.numel(); ++i) ASSERT_EQ(d.f32()[i], da.f32()[i]);
}

// Past kRowDotMaxRows rows quantized_linear decodes tiles of rows for an sgemm (on one thread, or
// a tile a thread in a team from cpu::kParallelMinMadds); up to it, it dots each decoded row with
// the activations. Activation quantization is per row, so every row of a many-row call equals
// that row alone (the float64-checked path above) up to the order of the sums: K crossing
// groups and blocks, N over several tiles (1,100: six in a team of two, the last shorter) and
// within one.
TEST(QuantLinear, ManyRowsAgreeWithEachRowAlone) {
  std::mt19937 rng(8);
  struct Shape3 {
    int64_t m, n, k;
  };
  for (const Shape3 sh : {Shape3{40, 1100, 300}, Shape3{9, 300, 70}, Shape3{12, 40, 256}}) {
    Tensor x = random_tensor({sh.m, sh.k}, rng, -2.0f, 2.0f), w = random_tensor({sh.n, sh.k}, rng);
    Tensor bias = random_tensor({sh.n}, rng);
    QuantizedWeight int8 = quantize_int8_per_channel(w);
    int8.input_scale = random_tensor({sh.k}, rng, 0.2f, 2.0f);
    const QuantizedWeight forms[] = {quantize_fp8_per_channel(w), quantize_fp8_block(w, 128, 128),
                                     int8, quantize_int4_group(w, 64)};
    for (const QuantizedWeight& q : forms) {
      SCOPED_TRACE(std::string(quant_format_name(q.format)) + " m=" + std::to_string(sh.m) +
                   " n=" + std::to_string(sh.n) + " k=" + std::to_string(sh.k));
      const Tensor y = run(x, q, &bias);
      for (int64_t r = 0; r < sh.m; ++r) {
        Tensor row = Tensor::empty({1, sh.k});
        std::copy_n(x.f32().begin() + r * sh.k, sh.k, row.f32().begin());
        const Tensor yr = run(row, q, &bias);
        const std::vector<double> alone(yr.f32().begin(), yr.f32().end());
        ASSERT_TRUE(all_close(y.f32().subspan(r * sh.n, sh.n), alone, 1e-5, 1e-4)) << "row " << r;
      }
    }
  }
}

// Activation rows whose largest magnitude is far below FLT_MIN * 448: the scale stops at FLT_MIN,
// so 1 / scale stays finite and the zeros stay zeros (0 * inf would be NaN), and an all-zero row
// keeps scale 1.
TEST(QuantLinear, TinyActivationRowsStayFinite) {
  EXPECT_EQ(activation_scale(0.0f, 448.0f), 1.0f);
  EXPECT_EQ(activation_scale(1e-40f, 448.0f), kMinActivationScale);
  EXPECT_EQ(activation_scale(448.0f, 448.0f), 1.0f);
  for (const bool fp8 : {true, false}) {
    std::vector<float> row = {0.0f, 1e-40f, -3e-41f, 0.0f, 2e-39f, 0.0f};
    if (fp8)
      fake_quantize_fp8_rows(row.data(), 1, 6, 6);
    else
      fake_quantize_int8_rows(row.data(), 1, 6);
    for (size_t i = 0; i < row.size(); ++i) {
      ASSERT_TRUE(std::isfinite(row[i])) << (fp8 ? "fp8 " : "int8 ") << i;
      EXPECT_LE(std::fabs(row[i]), 2.1e-39f);
    }
    EXPECT_EQ(row[0], 0.0f);
    // FP8's subnormals keep the largest value (2e-39 / FLT_MIN = 0.17 codes to 0.171875);
    // INT8 rounds it to 0.
    if (fp8) {
      EXPECT_GT(row[4], 0.0f);
    }
  }
}

TEST(QuantLinear, ValidateAndShapeChecksReject) {
  std::mt19937 rng(7);
  QuantizedWeight q = quantize_int4_group(random_tensor({8, 256}, rng), 128);
  q.scales = q.scales.view({16, 1});
  EXPECT_FALSE(q.validate().ok());
  QuantizedWeight f = quantize_fp8_per_channel(random_tensor({8, 64}, rng));
  Tensor x = random_tensor({2, 63}, rng), y = Tensor::empty({2, 8});
  EXPECT_THROW(ops::quantized_linear(x, f, nullptr, y), std::invalid_argument);
}

}  // namespace
}  // namespace kite

#include "quant/fp8_codec.h"

namespace kite {
namespace {

// Every E4M3 code's value below 448, the midpoint to the next code and the floats either side
// of it, each with both signs.
void add_code_probes(std::vector<float>& probes) {
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = fp8e4m3_to_f32(static_cast<uint8_t>(c)),
                hi = fp8e4m3_to_f32(static_cast<uint8_t>(c + 1));
    for (float v : {lo, (lo + hi) / 2, std::nextafter((lo + hi) / 2, 0.0f),
                    std::nextafter((lo + hi) / 2, 1e9f)})
      probes.insert(probes.end(), {v, -v});
  }
}

// The fast encoder used on hot paths equals core's exhaustive search: on every code's value,
// every midpoint between neighbouring codes (the ties), and random floats over the range.
TEST(QuantFp8Codec, FastEncoderMatchesExhaustiveSearch) {
  std::vector<float> probes = {0.0f, -0.0f, 448.0f, 500.0f, -1e9f, 1e-12f, 0.015625f, 0.0154f};
  add_code_probes(probes);
  std::mt19937 rng(9);
  for (int i = 0; i < 20000; ++i)
    probes.push_back(std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng),
                                std::uniform_int_distribution<int>(-12, 10)(rng)));
  int64_t bad = 0;
  for (float v : probes) bad += fp8e4m3_encode(v) != f32_to_fp8e4m3(v);
  EXPECT_EQ(bad, 0);
}

// fake_quantize_fp8_rows's 8-lane round trip (the value on E4M3's grid in fp32) against the
// encode then the table read, bit for bit: every code's value, the midpoints between codes and
// their neighbours (ties to even, carries into the exponent), the subnormal grid, ±0 and NaN, in
// rows whose amax sets a scale of 1 and in groups with other scales.
TEST(QuantFp8Codec, RoundTripInLanesEqualsEncodeThenTable) {
  std::vector<float> probes = {0.0f,      -0.0f,   448.0f, -448.0f,
                               0.015625f, 0.0154f, 1e-12f, std::nanf("")};
  add_code_probes(probes);
  const float* table = fp8e4m3_table();
  for (int64_t group : {int64_t{0}, int64_t{37}}) {  // one group a row (scale 1), or many
    const int64_t cols = static_cast<int64_t>(probes.size());
    std::vector<float> row = probes, want(probes.size());
    for (int64_t c0 = 0; c0 < cols; c0 += group ? group : cols) {
      const int64_t n = std::min(group ? group : cols, cols - c0);
      float amax = 0.0f;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(row[c0 + i]));
      const float sc = activation_scale(amax, 448.0f), inv = 1.0f / sc;
      for (int64_t i = 0; i < n; ++i) want[c0 + i] = table[fp8e4m3_encode(row[c0 + i] * inv)] * sc;
    }
    fake_quantize_fp8_rows(row.data(), 1, cols, group);
    for (int64_t i = 0; i < cols; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(row[i]), std::bit_cast<uint32_t>(want[i]))
          << "group " << group << " value " << probes[i] << " (" << i << ")";
  }
}

}  // namespace
}  // namespace kite
