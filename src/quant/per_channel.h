// The per-output-channel quantizer FP8 and INT8 share: one scale per weight row from its
// largest magnitude, codes = encode(w / scale). Internal to quant/.
#pragma once

#include <algorithm>
#include <cmath>

#include "quant/quantized_weight.h"

namespace kite::quant_detail {

// scale_of(amax) -> the row's scale; encode(float) -> one code of type Code.
template <typename Code, typename ScaleOf, typename Encode>
QuantizedWeight quantize_rows(const Tensor& weight, QuantFormat format, DType code_dtype,
                              ScaleOf scale_of, Encode encode) {
  const int64_t n = weight.size(0), k = weight.size(1);
  QuantizedWeight q;
  q.format = format;
  q.out_features = n;
  q.in_features = k;
  q.codes = Tensor::empty({n, k}, code_dtype);
  q.scales = Tensor::empty({n});
  const float* w = weight.data<float>();
#pragma omp parallel for schedule(static) if (n * k >= (1 << 20))
  for (int64_t r = 0; r < n; ++r) {
    const float* row = w + r * k;
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(row[i]));
    const float s = scale_of(amax);
    q.scales.data<float>()[r] = s;
    Code* c = q.codes.data<Code>() + r * k;
    for (int64_t i = 0; i < k; ++i) c[i] = encode(row[i] / s);
  }
  return q;
}

}  // namespace kite::quant_detail
