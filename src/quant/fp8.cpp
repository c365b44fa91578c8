// FP8 E4M3 weight quantizers and the dynamic activation quantizer of the W8A8 kernels.
//
// E4M3 (the OCP "fn" variant the checkpoints use) has no infinities and a largest finite value
// of 448, so a scale of amax / 448 maps a row's largest magnitude to the top of the range.
#include <algorithm>
#include <cmath>

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
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 20))
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += group) {
      float* v = x + r * cols + c0;
      const int64_t n = std::min(group, cols - c0);
      float amax = 0.0f;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float s = activation_scale(amax, kFp8Max), inv = 1.0f / s;
      const float* lut = fp8e4m3_table();  // a round trip: an encode and a table read
      for (int64_t i = 0; i < n; ++i) v[i] = lut[fp8e4m3_encode(v[i] * inv)] * s;
    }
  }
}

}  // namespace kite
