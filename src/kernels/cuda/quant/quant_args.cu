// The quantized linears' checks of what a caller hands in beside x and the weight (quant_args.h).
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/quant/quant_args.h"

namespace kite::cuda::quant_detail {

// A folded norm where the kernel would not fold it, or with the wrong shapes, is an error.
void check_folded_norm(const FoldedNorm* fold, const DeviceQuantizedWeight& w, const Tensor& x,
                       int64_t m, const void* ready, std::span<Tensor* const> ys, const char* op) {
  if (!fold) return;
  KITE_CUDA_OP_CHECK(quantized_linear_takes_folded_norm(w, m) && !ready, op,
                     "a folded norm at " + std::to_string(m) +
                         " rows, where this linear takes none "
                         "(quantized_linear_takes_folded_norm), or beside activation codes made "
                         "ahead");
  KITE_CUDA_OP_CHECK(fold->residual && fold->residual_out && fold->weight, op,
                     "a folded norm needs a residual, a residual_out and a weight");
  check_device(*fold->residual, DType::kBF16, op, "residual");
  check_device(*fold->residual_out, DType::kBF16, op, "residual_out");
  check_device(*fold->weight, DType::kBF16, op, "norm weight");
  KITE_CUDA_OP_CHECK(fold->residual->numel() == x.numel() &&
                         fold->residual_out->numel() == x.numel() &&
                         fold->weight->numel() == w.in_features,
                     op, "the residuals must match x and the norm weight have in_features values");
  KITE_CUDA_OP_CHECK(
      all_aligned(16, fold->residual->raw(), fold->residual_out->raw(), fold->weight->raw()), op,
      "the residuals and the norm weight must be 16-byte aligned");
  const Tensor& out = *fold->residual_out;
  KITE_CUDA_OP_CHECK(!bytes_overlap(*fold->residual, x) && !bytes_overlap(out, x) &&
                         !bytes_overlap(out, *fold->residual),
                     op, "residual_out, residual and x must not overlap");
  for (Tensor* y : ys)
    KITE_CUDA_OP_CHECK(!bytes_overlap(out, *y) && !bytes_overlap(*fold->residual, *y), op,
                       "the residuals must not overlap y");
}

// Codes handed to a linear that reads none would be ignored: a caller's mistake, so an error.
void check_ready_codes(const DeviceQuantizedWeight& w, int64_t m, const void* ready,
                       const char* op) {
  KITE_CUDA_OP_CHECK(!ready || quantized_linear_reads_activation_codes(w, m), op,
                     "activation codes made ahead, but this linear does not read codes at " +
                         std::to_string(m) + " rows (quantized_linear_reads_activation_codes)");
}

}  // namespace kite::cuda::quant_detail
