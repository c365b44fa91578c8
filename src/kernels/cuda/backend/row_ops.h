// Row-wise helper kernels the CUDA backend needs beyond kernels/cuda/cuda_ops.h: gathers and
// weighted scatter-adds of rows (MoE dispatch/combine), elementwise add and dtype conversion.
// Tensors are device tensors of F32 or BF16 (rows, indices I32); shapes are checked, indices
// are not (a bad row index is a programming error: rows come from the host-side router).
#pragma once

#include <cuda_runtime.h>

#include "core/tensor.h"

namespace kite::cuda {

// out[i, :] = x[rows[i], :] (x, out one dtype; rows I32 [n]).
void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out, cudaStream_t stream);

// out[rows[i], :] += weights[i] * y[i, :] (out F32 or y's dtype; weights F32 [n]; rows distinct).
void scatter_add_rows(Tensor& out, const Tensor& y, const Tensor& rows, const Tensor& weights,
                      cudaStream_t stream);

// out = a + b (any mix of F32/BF16), or out = a converted when b is null.
void add_convert(const Tensor& a, const Tensor* b, Tensor& out, cudaStream_t stream);

}  // namespace kite::cuda
