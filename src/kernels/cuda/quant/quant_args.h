// What a caller hands the quantized linears beside x and the weight, checked (quant_args.cu):
// activation codes made ahead, a folded norm. Internal to src/kernels/cuda/quant.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "kernels/cuda/quant/quant_linear.h"
#include "kernels/folded_norm.h"

namespace kite::cuda::quant_detail {

// Codes made ahead (`ready`) for a linear that reads none at M rows would be ignored: throws
// std::invalid_argument for `op`.
void check_ready_codes(const DeviceQuantizedWeight& w, int64_t m, const void* ready,
                       const char* op);
// A folded norm the linear cannot take at M rows (or beside codes made ahead), or whose
// residuals and weight do not fit x and the outputs ys: throws std::invalid_argument for `op`.
void check_folded_norm(const FoldedNorm* fold, const DeviceQuantizedWeight& w, const Tensor& x,
                       int64_t m, const void* ready, std::span<Tensor* const> ys, const char* op);

}  // namespace kite::cuda::quant_detail
