// INT8 per-channel weights and per-token dynamic INT8 activations (SmoothQuant's W8A8 with
// symmetric quantization): scale = amax / 127, q = round-half-even(x / scale) in [-127, 127]
// (activations: quant/activation_scale.h).
#include <algorithm>
#include <cmath>

#include "quant/activation_scale.h"
#include "quant/per_channel.h"
#include "quant/quantized_weight.h"

namespace kite {
namespace {

float int8_scale(float amax) { return amax > 0.0f ? amax / 127.0f : 1.0f; }

int8_t to_int8(float v) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(v), -127.0f, 127.0f));
}

}  // namespace

QuantizedWeight quantize_int8_per_channel(const Tensor& weight) {
  return quant_detail::quantize_rows<int8_t>(weight, QuantFormat::kInt8PerChannel, DType::kI8,
                                             int8_scale, to_int8);
}

void fake_quantize_int8_rows(float* x, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 20))
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * cols;
    float amax = 0.0f;
    for (int64_t i = 0; i < cols; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float s = activation_scale(amax, 127.0f), inv = 1.0f / s;
    for (int64_t i = 0; i < cols; ++i) v[i] = static_cast<float>(to_int8(v[i] * inv)) * s;
  }
}

}  // namespace kite
