// What the CUDA quantized-linear tests share: a weight quantized into a format by its default
// geometry, one op run on a forced decode path, an element-wise equality count, and the gated
// MLP's host reference through the CPU op.
#pragma once

#include "cuda_test_util.h"
#include "kernels/cuda/quant/quant_linear.h"
#include "kernels/ops.h"
#include "quant/quantized_weight.h"

namespace kite::cuda::testing {

// `w` in `format`: INT4 in groups of 128, FP8 block in 128 × 128 blocks.
inline QuantizedWeight quantize_as(QuantFormat format, const Tensor& w) {
  switch (format) {
    case QuantFormat::kInt4Group:
      return quantize_int4_group(w, 128);
    case QuantFormat::kFp8Block:
      return quantize_fp8_block(w, 128, 128);
    case QuantFormat::kInt8PerChannel:
      return quantize_int8_per_channel(w);
    case QuantFormat::kFp8PerChannel:
      break;
  }
  return quantize_fp8_per_channel(w);
}

// quantized_linear (no bias) into y with the decode path forced to `path`, then back to automatic.
inline void quantized_linear_on_path(int path, const Tensor& dx, const DeviceQuantizedWeight& dw,
                                     Tensor& y, DeviceBuffer& ws) {
  set_quant_decode_override(path);
  quantized_linear(test_blas(), dx, dw, nullptr, y, ws.data(), ws.size_bytes(), test_stream());
  set_quant_decode_override(0);
}

// Elements of two host tensors that are not equal (a NaN in either counts).
inline int64_t count_unequal(const Tensor& a, const Tensor& b) {
  int64_t differ = 0;
  for (int64_t i = 0; i < a.numel(); ++i) differ += !(a.data<float>()[i] == b.data<float>()[i]);
  return differ;
}

// silu(gate) * up from a gated MLP's F32 [m, 2 * inter] output (gate columns, then up): the
// CPU op (ops::silu_mul).
inline Tensor silu_mul_ref(const Tensor& both, int64_t inter) {
  Tensor ref = Tensor::empty({both.size(0), inter});
  ops::silu_mul(both, ref);
  return ref;
}

}  // namespace kite::cuda::testing
