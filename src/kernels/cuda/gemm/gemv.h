// Skinny BF16 linear (decode): y[M, N] = x[M, K] · W[N, K]^T (+ bias) for M <= kGemvMaxRows.
//
// At decode batch sizes the op is a stream over W, read once; x (tiny) stays in L1; fp32
// accumulation, one warp reduction per output feature. Two kernels (GemvKernel below): one
// warp per feature reading its row through registers, or W streamed through shared memory by
// the bulk copy engine (80–94 % of the measured HBM read bandwidth on the big Llama-3-8B shapes
// at M = 1, where the warp kernel reaches 67–77 %). linear() uses them for these shapes.
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "core/tensor.h"

namespace kite::cuda {

inline constexpr int64_t kGemvMaxRows = 8;
inline constexpr int kGemvMaxSegments = 4;

// Which kernel gemv() runs: one warp per output feature streaming W through registers
// (gemv.cu), or W streamed through shared memory by the bulk copy engine (gemv_bulk.cu).
// kAuto picks by shape (the measured winner): the bulk kernel at M = 1 for weights of
// kGemvBulkMinBytes and more (KITE_CUDA_GEMV_BULK_MIN overrides it, for A/B runs), the warp
// kernel otherwise. Switchable for benchmarks and tests.
enum class GemvKernel { kAuto, kWarpPerRow, kBulk };
inline constexpr int64_t kGemvBulkMinBytes = 32'000'000;
void set_gemv_kernel(GemvKernel kernel);
GemvKernel gemv_kernel();

// True when gemv() takes this call: BF16 x and W, y BF16 or F32 (bias in y's dtype), M in
// [1, gemv_rows()], K a multiple of 8 and x / W 16-byte aligned — and KITE_CUDA_NO_GEMV
// unset (an A/B switch: cuBLASLt for every shape).
bool gemv_applies(const Tensor& x, const Tensor& weight, const Tensor& y);

// Which rows linear() sends to the GEMV (the kernels take up to kGemvMaxRows): one row always,
// 2 to 8 rows only on weights under kGemvMultiRowMaxBytes. On Llama-3-8B's weights (33-235 MB)
// cuBLASLt measured faster from two rows (BENCHMARKS.md run 22: decode at batch 2 / 4 / 8
// 4.67 / 4.77 / 4.90 ms a step against 5.54 / 6.26 / 11.28 on the GEMV), on DeepSeek-V2-Lite's
// (2-13 MB, but for its first MLP and lm_head) the GEMV (batch 2 3.22 against 3.36 ms).
// KITE_CUDA_GEMV_ROWS=N (1..8) sends every weight up to N rows instead (A/B runs); so does
// set_gemv_rows(N) (tests; 0 restores the rule), gemv_rows() the setting (0: the rule).
inline constexpr int64_t kGemvMultiRowMaxBytes = 32'000'000;
int64_t gemv_rows();
void set_gemv_rows(int64_t rows);

// Shapes are checked by the caller (linear()).
void gemv(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y, int64_t m,
          cudaStream_t stream);
// The same with the output features split into consecutive parts, each written to its own
// [M, width_s] tensor (one dtype): q, k and v from one stacked weight in one launch.
void gemv_split(const Tensor& x, const Tensor& weight, const Tensor* bias,
                std::span<Tensor* const> ys, int64_t m, cudaStream_t stream);

// The SwiGLU input of an MLP in one pass: y[M, I] = silu(x · Wg^T) * (x · Wu^T) for a stacked
// gate_up = [Wg; Wu] of [2I, K], no bias. Applies where gemv would run the bulk kernel (that
// kernel keeps both halves of a feature in one block); elsewhere: linear, then silu_mul.
bool gemv_silu_mul_applies(const Tensor& x, const Tensor& gate_up, const Tensor& y);
void gemv_silu_mul(const Tensor& x, const Tensor& gate_up, Tensor& y, int64_t m,
                   cudaStream_t stream);

}  // namespace kite::cuda
