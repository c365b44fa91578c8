// A residual-add + RMSNorm folded into the linear that reads its output: the linear is given
// the norm's input x and computes the linear of rms_norm(residual + x) * weight, with
// residual_out = residual + x, as add_rms_norm then the linear on its output would. The CUDA
// backend's FP8 / INT8 decode GEMV does it in its own blocks (cuda/quant/quant_linear.h);
// elsewhere Linear / Backend::unfold_norm run add_rms_norm first.
#pragma once

#include "core/tensor.h"

namespace kite {

struct FoldedNorm {
  const Tensor* residual;  // [M, K]
  // [M, K]: residual + x. Where the linear folds the norm, it must not overlap residual (the
  // GEMV's blocks each read all of residual); where it does not, it may be residual itself.
  Tensor* residual_out;
  const Tensor* weight;  // [K]
  float eps;
};

}  // namespace kite
