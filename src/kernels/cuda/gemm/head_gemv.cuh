// The per-head GEMV's block (head_gemv.cu, head_linear.h's head_gemv): 8 warps, one output row
// each, streaming w[h]'s row with 16-byte loads against the step's few rows of x's slice for
// head h (from L1 after the first warp). Also run by the rope kernel's extra blocks
// (rope.cu), which computes MLA's absorbed query W_UK^T q_nope in the rope launch.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/dot_bf16.cuh"

namespace kite::cuda {

inline constexpr int kHeadGemvWarps = 8;

// y[m, h, row] = x[m, h, :k] · w[h, row, :] for m < rows (x, y: head slices xw / yw apart,
// x_off / y_off applied); n rows of k columns per head.
struct HeadGemvArgs {
  const bf16* x = nullptr;
  const bf16* w = nullptr;
  bf16* y = nullptr;
  int xw = 0, yw = 0, n = 0, k = 0, heads = 0, rows = 0;
};

// The launch's arguments for a call head_gemv_applies to (shapes checked: check_head_linear),
// and its blocks per head (grid: those x the heads).
HeadGemvArgs head_gemv_args(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y,
                            int64_t y_off);
int head_gemv_blocks_per_head(const HeadGemvArgs& a);

// 16-byte weight loads per lane issued before `wait`: a row of up to 32 * kHeadGemvHeld * 8
// values (MLA's W_UK rows are 128, W_UV's 512) is in registers before the kernel that writes x
// ends. (4 cost 8 registers more a thread, 48 at M = 1, for rows nobody has.)
inline constexpr int kHeadGemvHeld = 2;

// Block `row_block` (rows [8 row_block, +8)) of head h for M = a.rows rows of x. wait() runs
// between the weights' loads (never written by an earlier kernel) and the first read of x;
// every thread of the block calls it.
template <int M, typename Wait>
__device__ __forceinline__ void head_gemv_block(const HeadGemvArgs& a, int row_block, int h,
                                                const Wait& wait) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = row_block * kHeadGemvWarps + warp;
  const int k8 = a.k / 8;
  const uint4* wr =
      reinterpret_cast<const uint4*>(a.w + (static_cast<int64_t>(h) * a.n + row) * a.k);
  uint4 held[kHeadGemvHeld];
#pragma unroll
  for (int u = 0; u < kHeadGemvHeld; ++u)
    if (row < a.n && lane + 32 * u < k8) held[u] = __ldcs(wr + lane + 32 * u);
  wait();
  if (row >= a.n) return;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  auto dot = [&](const uint4& wv, int i) {
#pragma unroll
    for (int m = 0; m < M; ++m)
      dot8_bf16(wv,
                __ldg(reinterpret_cast<const uint4*>(a.x + (static_cast<int64_t>(m) * a.heads + h) *
                                                               a.xw) +
                      i),
                acc[m]);
  };
#pragma unroll
  for (int u = 0; u < kHeadGemvHeld; ++u)
    if (lane + 32 * u < k8) dot(held[u], lane + 32 * u);
  for (int i = lane + 32 * kHeadGemvHeld; i < k8; i += 32) dot(__ldcs(wr + i), i);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = warp_sum(acc[m]);
    if (lane == 0) a.y[(static_cast<int64_t>(m) * a.heads + h) * a.yw + row] = __float2bfloat16(v);
  }
}

}  // namespace kite::cuda
