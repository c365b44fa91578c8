// Row-wise helper kernels the CUDA backend needs beyond kernels/cuda/cuda_ops.h: gathers and
// weighted scatter-adds of rows (MoE dispatch/combine), column copies (a stacked linear's
// output split into its parts), elementwise add and dtype conversion. Tensors are device
// tensors of F32 or BF16 (rows, indices I32); shapes are checked, indices are not (a bad row
// index is a programming error: rows come from the host-side router).
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "core/tensor.h"

namespace kite::cuda {

// One column block of a copy_columns launch: dst[r, dst_off : dst_off + cols] =
// src[r, src_off : src_off + cols] for every row r of src and dst seen as [rows, last dim].
struct ColumnCopy {
  Tensor* dst;
  int64_t dst_off, src_off, cols;
};

// The copies in one launch per four (a kernel, not cudaMemcpy2DAsync: the copy engine's 2-D
// copies took 15 us a layer to split a 512-token prefill's q/k/v, BENCHMARKS.md run 37). Any
// dtype, as long as src and every dst share it; dst blocks must not overlap src.
void copy_columns(const Tensor& src, std::span<const ColumnCopy> copies, cudaStream_t stream);

// y's consecutive column blocks into outs in order (Backend::split_columns): one launch for up
// to four outputs.
void split_columns(const Tensor& y, std::span<Tensor* const> outs, cudaStream_t stream);

// out[i, :] = x[rows[i], :] (x, out one dtype; rows I32 [n]).
void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out, cudaStream_t stream);

// out[rows[i], :] += weights[i] * y[i, :] (out F32 or y's dtype; weights F32 [n]; rows distinct).
void scatter_add_rows(Tensor& out, const Tensor& y, const Tensor& rows, const Tensor& weights,
                      cudaStream_t stream);

// out = a + b (any mix of F32/BF16), or out = a converted when b is null.
void add_convert(const Tensor& a, const Tensor* b, Tensor& out, cudaStream_t stream);

}  // namespace kite::cuda
