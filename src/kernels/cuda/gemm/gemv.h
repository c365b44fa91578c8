// Skinny BF16 linear (decode): y[M, N] = x[M, K] · W[N, K]^T (+ bias) for M <= kGemvMaxRows.
//
// At decode batch sizes the op is a stream over W: each warp owns one output feature, reads its
// W row once with 16-byte loads (several in flight per lane) and dots it with all M rows of x
// (tiny, L1-resident); fp32 accumulation, one warp reduction per row. cuBLASLt reaches ~72 % of
// HBM on these shapes (tools/cuda/NOTES.md); this kernel is what linear() uses for them.
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "core/tensor.h"

namespace kite::cuda {

inline constexpr int64_t kGemvMaxRows = 8;
inline constexpr int kGemvMaxSegments = 4;

// True when gemv() takes this call: BF16 x and W, y BF16 or F32 (bias in y's dtype), M in
// [1, kGemvMaxRows], K a multiple of 8 and x / W 16-byte aligned — and KITE_CUDA_NO_GEMV
// unset (an A/B switch: cuBLASLt for every shape).
bool gemv_applies(const Tensor& x, const Tensor& weight, const Tensor& y);

// Shapes are checked by the caller (linear()).
void gemv(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y, int64_t m,
          cudaStream_t stream);
// The same with the output features split into consecutive parts, each written to its own
// [M, width_s] tensor (one dtype): q, k and v from one stacked weight in one launch.
void gemv_split(const Tensor& x, const Tensor& weight, const Tensor* bias,
                std::span<Tensor* const> ys, int64_t m, cudaStream_t stream);

}  // namespace kite::cuda
