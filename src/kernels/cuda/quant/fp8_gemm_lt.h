// FP8 (and INT8) W8A8 GEMM through cuBLASLt for many rows (prefill, large decode batches): y[M, N] =
// (xq[M, K] · wq[N, K]^T) * x_scale[m] * w_scale[n] (+ bias[n]), with FP8 E4M3 xq / wq, BF16
// output. Two routes: cuBLASLt's outer-vector scaling (the row and column scales and the bias
// in its epilogue), or an unscaled FP8 -> F32 product plus a scale kernel; neither is faster
// at every shape on the H200, so each shape's first eager call times both (fp8_gemm_lt.cpp).
// quantized_linear (quant_linear.h) uses it for kFp8PerChannel when M is above the decode
// kernel's range; its own tensor-core kernel re-reads the weight once per 64 rows, which made
// FP8 slower than BF16 at 128 concurrent sequences (docs/BENCHMARKS.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cuda/gemm/blaslt.h"

namespace kite::cuda {

// wq: N rows of K FP8 codes, row stride ldw bytes; xq: M rows, row stride ldx bytes (K, ldw and
// ldx multiples of 16, pointers 16-byte aligned); scales F32 device vectors; y BF16 or F32 [M,
// N]; bias BF16 [N] or null. The F32 route puts the product into `scratch` (F32 [M, N],
// fp8_gemm_scratch_floats) and a small kernel applies x_scale[m] * w_scale[n] and the bias; it is
// the only one where cuBLASLt lacks outer-vector scaling, and the only one for F32 y. Returns false
// (and launches nothing) when cuBLASLt has no FP8 algorithm at all: the caller then uses its own
// kernel.
bool fp8_rowwise_gemm(BlasLtContext& ctx, const void* wq, const float* w_scale, int64_t n,
                      int64_t ldw, const void* xq, const float* x_scale, int64_t m, int64_t ldx,
                      int64_t k, const Tensor* bias, Tensor& y, float* scratch,
                      cudaStream_t stream);
inline int64_t fp8_gemm_scratch_floats(int64_t m, int64_t n) { return m * n; }

// Test/benchmark hook, not for serving: 0 = the F32 route, 1 = outer vectors where cuBLASLt
// has them, -1 = back to the default (KITE_CUDA_FP8_OUTER_VEC, else the timed choice).
void set_fp8_lt_route_override(int route);
// The route fp8_rowwise_gemm's last call took (0 F32, 1 outer vectors; -1 none yet).
int fp8_lt_last_route();

// The INT8 twin (SmoothQuant W8A8 beyond decode sizes): S8 x S8 -> S32 into `scratch` (int32
// [M, N], exact), then the row and column scales and the bias; N a multiple of 4. Returns false
// (and launches nothing) when cuBLASLt has no algorithm for the shape.
bool int8_rowwise_gemm(BlasLtContext& ctx, const void* wq, const float* w_scale, int64_t n,
                       int64_t ldw, const void* xq, const float* x_scale, int64_t m, int64_t ldx,
                       int64_t k, const Tensor* bias, Tensor& y, int32_t* scratch,
                       cudaStream_t stream);

// y[m, n] = acc[m, n] * x_scale[m] * w_scale[n] + bias[n], rounded to y's dtype (BF16 or F32;
// fp8_scale.cu).
void scale_rows_cols(const float* acc, const float* x_scale, const float* w_scale,
                     const Tensor* bias, Tensor& y, int64_t m, int64_t n, cudaStream_t stream);
void scale_rows_cols(const int32_t* acc, const float* x_scale, const float* w_scale,
                     const Tensor* bias, Tensor& y, int64_t m, int64_t n, cudaStream_t stream);

}  // namespace kite::cuda
