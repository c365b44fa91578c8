// Decode-size expert GEMV (moe_grouped_gemv, moe_dispatch.h).
//
// At decode a layer routes a handful of rows to each chosen expert, so the work is a stream
// over the chosen experts' weights; the grouped GEMM's 64-row tiles would read them through a
// two-stage pipeline built for thousands of rows. Here block (column tile, expert e) reads
// e's rows from the permutation's offsets (on the device, no sync), and its 8 warps each stream
// four weight rows with 16-byte loads (several in flight per lane) against all of the expert's
// rows, in chunks of up to 8 rows held in registers. Blocks of experts without rows exit at
// once (one block per expert, not per permuted row: at batch 64 the per-row grid launched
// about 135,000 blocks per expert GEMV, nearly all of which exited at once).
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm/dot_bf16.cuh"
#include "kernels/cuda/moe/moe_dispatch.h"

namespace kite::cuda {
namespace {

constexpr int kWarps = 8;   // warps per block
constexpr int kChunk = 8;   // expert rows per pass over the weight rows

// Each warp streams kRowsPerWarp weight rows (output columns), kLoads 16-byte loads of each in
// flight per lane; an x value loaded once serves all of the warp's rows. At DeepSeek-V2-Lite
// batch 64, four rows per warp took the expert GEMVs from 527 + 312 to 430 + 278 us against one
// row per warp (4 loads in flight), which reloaded x from L1 for every row (BENCHMARKS.md,
// run 7).
constexpr int kRowsPerWarp = 4;
constexpr int kLoads = 2;  // 16-byte loads of each row in flight per lane

__global__ void __launch_bounds__(kWarps * 32)
    grouped_gemv_kernel(const bf16* __restrict__ xp, const bf16* __restrict__ w,
                        const int32_t* __restrict__ offsets, int n, int k,
                        bf16* __restrict__ yp) {
  const int e = blockIdx.y, j = offsets[e], row_end = offsets[e + 1];
  if (j == row_end) return;  // no rows for this expert
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col0 = (blockIdx.x * kWarps + warp) * kRowsPerWarp;
  if (col0 >= n) return;
  const int k8 = k / 8;
  const uint4* wr[kRowsPerWarp];
#pragma unroll
  // Rows past n re-read row col0; their sums are not written.
  for (int r = 0; r < kRowsPerWarp; ++r)
    wr[r] = reinterpret_cast<const uint4*>(
        w + (static_cast<int64_t>(e) * n + (col0 + r < n ? col0 + r : col0)) * k);
  for (int r0 = j; r0 < row_end; r0 += kChunk) {
    const int rows = min(kChunk, row_end - r0);
    const uint4* xr = reinterpret_cast<const uint4*>(xp + static_cast<int64_t>(r0) * k);
    float acc[kRowsPerWarp][kChunk];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int m = 0; m < kChunk; ++m) acc[r][m] = 0.0f;
    int i = lane;
    for (; i + 32 * (kLoads - 1) < k8; i += 32 * kLoads) {
      uint4 wv[kRowsPerWarp][kLoads];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int u = 0; u < kLoads; ++u) wv[r][u] = __ldcs(wr[r] + i + 32 * u);
#pragma unroll
      for (int u = 0; u < kLoads; ++u)
#pragma unroll
        for (int m = 0; m < kChunk; ++m)
          if (m < rows) {
            const uint4 xv = __ldg(xr + m * k8 + i + 32 * u);
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) dot8_bf16(wv[r][u], xv, acc[r][m]);
          }
    }
    for (; i < k8; i += 32) {
      uint4 wv[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) wv[r] = __ldcs(wr[r] + i);
#pragma unroll
      for (int m = 0; m < kChunk; ++m)
        if (m < rows) {
          const uint4 xv = __ldg(xr + m * k8 + i);
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) dot8_bf16(wv[r], xv, acc[r][m]);
        }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int m = 0; m < kChunk; ++m) {
        const float v = warp_sum(acc[r][m]);
        if (lane == 0 && m < rows && col0 + r < n)
          yp[static_cast<int64_t>(r0 + m) * n + col0 + r] = __float2bfloat16(v);
      }
  }
}

}  // namespace

void moe_grouped_gemv(const Tensor& xp, const Tensor& w, const MoePermutation& perm, Tensor& yp,
                      cudaStream_t stream) {
  constexpr const char* op = "moe_grouped_gemv";
  const auto [pairs, n, k] = check_grouped_linear_args(op, xp, w, perm, yp);
  KITE_CUDA_OP_CHECK(k % 8 == 0 && all_aligned(16, xp.raw(), w.raw()), op,
                     "K must be a multiple of 8 and xp, w 16-byte aligned");
  KITE_CUDA_OP_CHECK(perm.num_experts <= 65535 && n <= (int64_t{1} << 30) &&
                         k <= (int64_t{1} << 30),
                     op, "too many experts or columns for one launch");
  if (pairs == 0 || n == 0) return;
  const dim3 grid(static_cast<unsigned>((n + kWarps * kRowsPerWarp - 1) / (kWarps * kRowsPerWarp)),
                  static_cast<unsigned>(perm.num_experts));
  grouped_gemv_kernel<<<grid, kWarps * 32, 0, stream>>>(
      static_cast<const bf16*>(xp.raw()), static_cast<const bf16*>(w.raw()),
      static_cast<const int32_t*>(perm.offsets.raw()), static_cast<int>(n), static_cast<int>(k),
      static_cast<bf16*>(yp.raw()));
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
