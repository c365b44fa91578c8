// Group-wise asymmetric INT4 (AWQ / GPTQ): per group of `group_size` input channels of one
// output row, scale = (max - min) / 15 and zero = clamp(round(-min / scale), 0, 15), so
// q = clamp(round(w / scale) + zero, 0, 15) and w ≈ (q - zero) * scale, as AutoAWQ's
// pseudo_quantize_tensor computes it (the scale rounded to F16, as it is stored).
#include <algorithm>
#include <cmath>

#include "quant/quantized_weight.h"

namespace kite {

QuantizedWeight empty_int4_group(int64_t out, int64_t in, int64_t group_size) {
  const int64_t groups = (in + group_size - 1) / group_size;
  QuantizedWeight q;
  q.format = QuantFormat::kInt4Group;
  q.out_features = out;
  q.in_features = in;
  q.group_size = group_size;
  q.codes = Tensor::zeros({out, (in + 1) / 2}, DType::kU8);
  q.scales = Tensor::empty({out, groups});
  q.zeros = Tensor::empty({out, groups}, DType::kU8);
  return q;
}

QuantizedWeight quantize_int4_group(const Tensor& weight, int64_t group_size,
                                    const std::vector<float>* clip) {
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t groups = (k + group_size - 1) / group_size;
  QuantizedWeight q = empty_int4_group(n, k, group_size);
  const float* w = weight.data<float>();
#pragma omp parallel for schedule(static) if (n * k >= (1 << 20))
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* c = q.codes.data<uint8_t>() + r * ((k + 1) / 2);
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * group_size, c1 = std::min(k, c0 + group_size);
      const float bound = clip ? (*clip)[r * groups + g] : INFINITY;
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t i = c0; i < c1; ++i) {
        const float v = std::clamp(w[r * k + i], -bound, bound);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      // Scales are stored as F16 (AWQ / GPTQ checkpoints, the GPU kernels), so round them here
      // and derive the zero and codes from the rounded scale.
      const float s = f16_to_f32(f32_to_f16(std::max(hi - lo, 1e-5f) / 15.0f));
      const float z = std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
      q.scales.data<float>()[r * groups + g] = s;
      q.zeros.data<uint8_t>()[r * groups + g] = static_cast<uint8_t>(z);
      for (int64_t i = c0; i < c1; ++i) {
        const float v = std::clamp(w[r * k + i], -bound, bound);
        const auto code = static_cast<uint8_t>(std::clamp(std::nearbyint(v / s) + z, 0.0f, 15.0f));
        c[i >> 1] |= (i & 1) ? static_cast<uint8_t>(code << 4) : code;
      }
    }
  }
  return q;
}

}  // namespace kite
