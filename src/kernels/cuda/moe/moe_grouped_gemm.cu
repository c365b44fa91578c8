// Grouped GEMM for MoE experts on the device (moe_grouped_linear, moe_dispatch.h).
//
// Block (row tile, column tile): the row tile is one of the kMoeRowTile-row tiles the
// permutation counted (tile_offsets); a binary search over tile_offsets finds its expert, so
// the host never needs the counts. The grid's row tiles are an upper bound (P / 64 + E);
// blocks past the real count exit. Each block computes a 64 x 128 tile of yp with four warps
// (2 x 2, 32 x 64 each) by mma.sync m16n8k16, K in steps of 64 staged two deep by cp.async
// into swizzled shared memory (attention/mma_tile.cuh). Rows past the expert's end and columns
// or K past the matrix are zero-filled on load and not stored.
#include <algorithm>

#include "kernels/cuda/attention/mma_tile.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/moe_dispatch.h"

namespace kite::cuda {
namespace {

using namespace attention::mma;

constexpr int kThreads = 128;
constexpr int kBM = kMoeRowTile;  // 64
constexpr int kBN = 128;
constexpr int kBK = 64;
constexpr int kABytes = kBM * kBK * 2;
constexpr int kBBytes = kBN * kBK * 2;
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kSmemBytes = 2 * kStageBytes;

__global__ void __launch_bounds__(kThreads)
    grouped_gemm_kernel(const bf16* __restrict__ xp, const bf16* __restrict__ w,
                        const int32_t* __restrict__ offsets,
                        const int32_t* __restrict__ tile_offsets, int num_experts, int n, int k,
                        bf16* __restrict__ yp) {
  extern __shared__ __align__(128) char smem[];
  const int tile = blockIdx.x;
  if (tile >= tile_offsets[num_experts]) return;
  // The expert e with tile_offsets[e] <= tile < tile_offsets[e + 1] (the last such e: experts
  // with no rows have empty ranges).
  int lo = 0, hi = num_experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offsets[mid] <= tile)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int e = lo;
  const int row0 = offsets[e] + (tile - tile_offsets[e]) * kBM;
  const int row_end = offsets[e + 1];
  const int n0 = blockIdx.y * kBN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 2, wn = warp % 2;  // warp tile: rows 32 wm.., cols 64 wn..
  const bf16* w_e = w + static_cast<int64_t>(e) * n * k;

  auto load_stage = [&](int kt, char* dst) {
    const int k0 = kt * kBK;
#pragma unroll
    for (int i = 0; i < kBM * 8 / kThreads; ++i) {
      const int idx = tid + i * kThreads, r = idx / 8, c = idx % 8;
      const bool valid = row0 + r < row_end && k0 + c * 8 < k;
      const bf16* src = valid ? xp + static_cast<int64_t>(row0 + r) * k + k0 + c * 8 : xp;
      cp_async16(dst + swz<kBK>(r, c), src, valid);
    }
#pragma unroll
    for (int i = 0; i < kBN * 8 / kThreads; ++i) {
      const int idx = tid + i * kThreads, r = idx / 8, c = idx % 8;
      const bool valid = n0 + r < n && k0 + c * 8 < k;
      const bf16* src = valid ? w_e + static_cast<int64_t>(n0 + r) * k + k0 + c * 8 : w;
      cp_async16(dst + kABytes + swz<kBK>(r, c), src, valid);
    }
  };

  float acc[2][8][4] = {};
  const int k_tiles = (k + kBK - 1) / kBK;
  load_stage(0, smem);
  cp_async_commit();
  for (int kt = 0; kt < k_tiles; ++kt) {
    if (kt + 1 < k_tiles) {
      load_stage(kt + 1, smem + ((kt + 1) & 1) * kStageBytes);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint32_t sa = smem_addr(smem + (kt & 1) * kStageBytes);
    const uint32_t sb = sa + kABytes;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; kk += 2) {
      uint32_t a[2][2][4];  // [m-tile][k-step]
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        ldmatrix_x4(a[mt][0], a_addr<kBK>(sa, wm * 32 + mt * 16, kk * 16, lane));
        ldmatrix_x4(a[mt][1], a_addr<kBK>(sa, wm * 32 + mt * 16, kk * 16 + 16, lane));
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        uint32_t b[4];
        ldmatrix_x4(b, kb_addr<kBK>(sb, wn * 64 + nt * 8, kk * 16, lane));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_bf16(acc[mt][nt], a[mt][0], b[0], b[1]);
          mma_bf16(acc[mt][nt], a[mt][1], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the next iteration refills this stage
  }

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + wm * 32 + mt * 16 + g + half * 8;
      if (row >= row_end) continue;
      bf16* dst = yp + static_cast<int64_t>(row) * n;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int col = n0 + wn * 64 + nt * 8 + 2 * t;
        if (col < n)
          *reinterpret_cast<uint32_t*>(dst + col) =
              pack_bf16(acc[mt][nt][2 * half], acc[mt][nt][2 * half + 1]);
      }
    }
  }
}

}  // namespace

void moe_grouped_linear(const Tensor& xp, const Tensor& w, const MoePermutation& perm, Tensor& yp,
                        cudaStream_t stream) {
  constexpr const char* op = "moe_grouped_linear";
  const auto [pairs, n, k] = check_grouped_linear_args(op, xp, w, perm, yp);
  KITE_CUDA_OP_CHECK(n % 8 == 0 && k % 8 == 0 && n > 0 && k > 0, op,
                     "N and K must be positive multiples of 8");
  KITE_CUDA_OP_CHECK(all_aligned(16, xp.raw(), w.raw(), yp.raw()), op,
                     "xp, w and yp must start 16-byte aligned");
  KITE_CUDA_OP_CHECK(n * k < (int64_t{1} << 40) && n <= INT32_MAX && k <= INT32_MAX, op,
                     "weights too large");
  KITE_CUDA_OP_CHECK(!bytes_overlap(yp, xp) && !bytes_overlap(yp, w), op,
                     "yp must not overlap xp or w");
  if (pairs == 0) return;
  static const bool configured = [] {
    KITE_CUDA_CHECK(cudaFuncSetAttribute(grouped_gemm_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)configured;
  // Every expert adds at most one partial tile to the full ones.
  const int64_t max_tiles = (pairs + kBM - 1) / kBM + perm.num_experts;
  const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>((n + kBN - 1) / kBN));
  KITE_CUDA_OP_CHECK(grid.y <= 65535, op, "N too large for one launch");
  grouped_gemm_kernel<<<grid, kThreads, kSmemBytes, stream>>>(
      static_cast<const bf16*>(xp.raw()), static_cast<const bf16*>(w.raw()),
      static_cast<const int32_t*>(perm.offsets.raw()),
      static_cast<const int32_t*>(perm.tile_offsets.raw()), static_cast<int>(perm.num_experts),
      static_cast<int>(n), static_cast<int>(k), static_cast<bf16*>(yp.raw()));
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
