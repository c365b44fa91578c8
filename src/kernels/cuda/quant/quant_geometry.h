// Host-side geometry shared by the quantized-linear files (quant_linear.cu: the kernels and
// the op; quant_weights.cu: upload and dummy weights; quant_activation.cu). Internal to src/kernels/cuda/quant.
#pragma once

#include <cstdint>

namespace kite::cuda::quant_detail {

constexpr int64_t kChunk = 64;     // input channels per weight tile / scale step
constexpr int64_t kRowAlign = 64;  // N_pad: a whole number of the widest block's rows

inline int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace kite::cuda::quant_detail
