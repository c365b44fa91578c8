// FP8 E4M3 weight quantizers and the dynamic activation quantizer of the W8A8 kernels.
//
// E4M3 (the OCP "fn" variant the checkpoints use) has no infinities and a largest finite value
// of 448, so a scale of amax / 448 maps a row's largest magnitude to the top of the range.
#include <algorithm>
#include <cmath>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "quant/activation_scale.h"
#include "quant/fp8_codec.h"
#include "quant/per_channel.h"
#include "quant/quantized_weight.h"

namespace kite {
namespace {

constexpr float kFp8Max = 448.0f;

// amax / 448, or 1 for an all-zero block (any scale represents zeros exactly).
float fp8_scale(float amax) { return amax > 0.0f ? amax / kFp8Max : 1.0f; }

}  // namespace

QuantizedWeight quantize_fp8_per_channel(const Tensor& weight) {
  return quant_detail::quantize_rows<uint8_t>(weight, QuantFormat::kFp8PerChannel,
                                              DType::kF8E4M3, fp8_scale, fp8e4m3_encode);
}

QuantizedWeight quantize_fp8_block(const Tensor& weight, int64_t br, int64_t bc) {
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t sr = (n + br - 1) / br, sc = (k + bc - 1) / bc;
  QuantizedWeight q;
  q.format = QuantFormat::kFp8Block;
  q.out_features = n;
  q.in_features = k;
  q.block_rows = br;
  q.block_cols = bc;
  q.codes = Tensor::empty({n, k}, DType::kF8E4M3);
  q.scales = Tensor::empty({sr, sc});
  const float* w = weight.data<float>();
  for (int64_t b = 0; b < sr * sc; ++b) {
    const int64_t r0 = (b / sc) * br, c0 = (b % sc) * bc;
    const int64_t r1 = std::min(n, r0 + br), c1 = std::min(k, c0 + bc);
    float amax = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * k + c]));
    const float s = fp8_scale(amax);
    q.scales.data<float>()[b] = s;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c)
        q.codes.data<uint8_t>()[r * k + c] = fp8e4m3_encode(w[r * k + c] / s);
  }
  return q;
}

void fake_quantize_fp8_rows(float* x, int64_t rows, int64_t cols, int64_t group) {
  if (group <= 0) group = cols;
  const float* lut = fp8e4m3_table();
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 20))
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += group) {
      float* v = x + r * cols + c0;
      const int64_t n = std::min(group, cols - c0);
      float amax = 0.0f;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float s = activation_scale(amax, kFp8Max), inv = 1.0f / s;
      int64_t i = 0;
#if defined(__AVX2__)
      // The round trip below in 8 lanes: the value on E4M3's grid computed in fp32 (3 mantissa
      // bits, ties to even, a carry bumping the exponent; below 2^-6 multiples of 2^-9) equals
      // the table's value of the code (QuantFp8Codec.RoundTripInLanesEqualsEncodeThenTable).
      // 16 % of an FP8 prefill of kite-tiny was the scalar encode and table read.
      const __m256 vs = _mm256_set1_ps(s), vinv = _mm256_set1_ps(inv);
      const __m256 max = _mm256_set1_ps(kFp8Max), min_normal = _mm256_set1_ps(0x1p-6f);
      const __m256 to_sub = _mm256_set1_ps(512.0f), from_sub = _mm256_set1_ps(0x1p-9f);
      const __m256 sign_bit = _mm256_set1_ps(-0.0f), nan = _mm256_set1_ps(lut[0x7F]);
      const __m256i half = _mm256_set1_epi32(0x7FFFF), one = _mm256_set1_epi32(1);
      const __m256i keep = _mm256_set1_epi32(static_cast<int>(0xFFF00000u));
      for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_mul_ps(_mm256_loadu_ps(v + i), vinv);
        const __m256 sign = _mm256_and_ps(f, sign_bit);
        const __m256 a = _mm256_min_ps(_mm256_andnot_ps(sign_bit, f), max);  // NaN -> 448
        const __m256i bits = _mm256_castps_si256(a);
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 20), one);
        const __m256 normal = _mm256_castsi256_ps(
            _mm256_and_si256(_mm256_add_epi32(bits, _mm256_add_epi32(half, odd)), keep));
        const __m256 sub =
            _mm256_mul_ps(_mm256_round_ps(_mm256_mul_ps(a, to_sub),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                          from_sub);
        __m256 q = _mm256_or_ps(
            _mm256_blendv_ps(normal, sub, _mm256_cmp_ps(a, min_normal, _CMP_LT_OQ)), sign);
        q = _mm256_blendv_ps(q, nan, _mm256_cmp_ps(f, f, _CMP_UNORD_Q));
        _mm256_storeu_ps(v + i, _mm256_mul_ps(q, vs));
      }
#endif
      for (; i < n; ++i) v[i] = lut[fp8e4m3_encode(v[i] * inv)] * s;  // an encode, a table read
    }
  }
}

}  // namespace kite
