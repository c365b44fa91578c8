// INT8 per-channel weights and per-token dynamic INT8 activations (SmoothQuant's W8A8 with
// symmetric quantization): scale = amax / 127, q = round-half-even(x / scale) in [-127, 127].
#include <algorithm>
#include <cmath>

#include "quant/quantized_weight.h"

namespace kite {
namespace {

float int8_scale(float amax) { return amax > 0.0f ? amax / 127.0f : 1.0f; }

int8_t to_int8(float v) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(v), -127.0f, 127.0f));
}

}  // namespace

QuantizedWeight quantize_int8_per_channel(const Tensor& weight) {
  const int64_t n = weight.size(0), k = weight.size(1);
  QuantizedWeight q;
  q.format = QuantFormat::kInt8PerChannel;
  q.out_features = n;
  q.in_features = k;
  q.codes = Tensor::empty({n, k}, DType::kI8);
  q.scales = Tensor::empty({n});
  const float* w = weight.data<float>();
#pragma omp parallel for schedule(static) if (n * k >= (1 << 20))
  for (int64_t r = 0; r < n; ++r) {
    const float* row = w + r * k;
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(row[i]));
    const float s = int8_scale(amax);
    q.scales.data<float>()[r] = s;
    int8_t* c = q.codes.data<int8_t>() + r * k;
    for (int64_t i = 0; i < k; ++i) c[i] = to_int8(row[i] / s);
  }
  return q;
}

void fake_quantize_int8_rows(float* x, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 20))
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * cols;
    float amax = 0.0f;
    for (int64_t i = 0; i < cols; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float s = int8_scale(amax);
    for (int64_t i = 0; i < cols; ++i) v[i] = static_cast<float>(to_int8(v[i] / s)) * s;
  }
}

}  // namespace kite
