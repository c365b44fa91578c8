// The decode GEMV as a stream through shared memory (Hopper's bulk copy engine): one
// persistent block per SM; one producer thread copies weight tiles (8 rows x 2048 columns,
// one contiguous copy per row) into a 4-deep ring while 8 consumer warps — one per row of the
// tile — dot them with x. Unlike the warp-per-row kernel (gemv.cu), the
// bytes in flight do not depend on registers or on how many warps are resident: a whole ring
// of copies is outstanding per block, which is what a stream at the HBM roofline needs.
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm/dot_bf16.cuh"
#include "kernels/cuda/gemm/gemv_out.cuh"
#include "kernels/cuda/launch_pdl.cuh"

namespace kite::cuda {
namespace {

// The one tile shape kept (BENCHMARKS.md, run 5: 8 rows x 2048 columns, 4
// stages was best or within 2 % on every Llama-3-8B shape of the seven measured at M = 1).
constexpr int kRows = 8;      // consumer warps; rows of W per tile
constexpr int kChunk = 2048;  // columns per tile row (4 KB)
constexpr int kStages = 4;    // tiles in flight per block (128 KB)
constexpr int kTileBytes = kRows * kChunk * 2;
constexpr int kThreads = (kRows + 1) * 32;
// Tiles, then full and empty barriers, then the gated mode's up values [kRows / 2][8 rows].
constexpr int kSmemBytes = kStages * kTileBytes + 2 * kStages * 8 + kRows / 2 * 8 * 4;

// Rows of W in tile row r of row group g. Plain: kRows consecutive rows. GATED (W = [gate;
// up], `half` rows each): kRows / 2 gate rows and the up rows of the same features, so one
// block holds both halves of each output feature.
template <bool GATED>
__device__ __forceinline__ int64_t tile_row(int64_t g, int r, int64_t half) {
  if (!GATED) return g * kRows + r;
  constexpr int kHalf = kRows / 2;
  return r < kHalf ? g * kHalf + r : half + g * kHalf + (r - kHalf);
}
template <bool GATED>
__device__ __forceinline__ bool tile_row_valid(int64_t g, int r, int64_t n) {
  if (!GATED) return g * kRows + r < n;
  constexpr int kHalf = kRows / 2;
  return g * kHalf + r % kHalf < n / 2;
}

// Work items of block b: row groups g = b, b + gridDim.x, ..., each split into
// ceil(k / kChunk) column chunks, taken in that order by producer and consumers alike.
// GATED: y[M, n / 2] = silu(x · Wgate^T) * (x · Wup^T), out.y[0] (fused SwiGLU, no bias).
template <int M, typename TOut, bool GATED>
__global__ void __launch_bounds__(kThreads, 1)
    gemv_bulk_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                     const TOut* __restrict__ bias, const OutSegments<TOut> out, int64_t n_rows,
                     int64_t k) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kTileBytes);
  uint64_t* empty = full + kStages;
  float* up_acc = reinterpret_cast<float*>(empty + kStages);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t half = n_rows / 2;
  const int64_t groups =
      GATED ? (half + kRows / 2 - 1) / (kRows / 2) : (n_rows + kRows - 1) / kRows;
  const int64_t my_groups =
      blockIdx.x < groups ? (groups - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  if (threadIdx.x == 0) mbar_init_ring(full, empty, kStages, kRows * 32);
  __syncthreads();

  // Producer and consumers walk the same items, a row group's chunks in turn; item n of the
  // block takes ring slot n % kStages. Nested loops, not item / chunks: a 64-bit division per
  // item and thread costs more issue slots than the tile's dot products leave spare.
  if (warp == kRows) {  // the producer: weights are never written by an earlier kernel, so
    // their stream starts before pdl_wait (while the kernel that writes x still runs).
    if (lane == 0) {
      const uint64_t policy = l2_evict_first_policy();
      int64_t n = 0;
      for (int64_t j = 0; j < my_groups; ++j) {
        const int64_t g = blockIdx.x + j * gridDim.x;
        int rows = 0;
        for (int r = 0; r < kRows; ++r) rows += tile_row_valid<GATED>(g, r, n_rows);
        for (int64_t col0 = 0; col0 < k; col0 += kChunk, ++n) {
          const int s = ring_slot_to_fill<kStages>(empty, n);
          const uint32_t bytes = static_cast<uint32_t>((k - col0 < kChunk ? k - col0 : kChunk) * 2);
          mbar_arrive_expect_tx(&full[s], bytes * rows);
          uint8_t* tile = smem + s * kTileBytes;
          for (int r = 0; r < kRows; ++r)
            if (tile_row_valid<GATED>(g, r, n_rows))
              bulk_copy_g2s(tile + r * kChunk * 2, w + tile_row<GATED>(g, r, half) * k + col0,
                            bytes, &full[s], policy);
        }
      }
    }
    return;
  }

  pdl_wait();
  pdl_trigger();
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  const int64_t k8 = k / 8;
  const uint4* tile_row0 = reinterpret_cast<const uint4*>(smem + warp * kChunk * 2);
  int64_t n = 0;
  for (int64_t j = 0; j < my_groups; ++j) {
    const int64_t g = blockIdx.x + j * gridDim.x;
    const bool valid = tile_row_valid<GATED>(g, warp, n_rows);
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = 0.0f;
    for (int64_t col8 = 0; col8 < k8; col8 += kChunk / 8, ++n) {
      const int s = ring_slot_filled<kStages>(full, n);
      const int cols8 = static_cast<int>(k8 - col8 < kChunk / 8 ? k8 - col8 : kChunk / 8);
      if (valid) {
        const uint4* tile = tile_row0 + s * (kTileBytes / 16);
        const uint4* xc = xr + col8;
#pragma unroll 4
        for (int i = lane; i < cols8; i += 32) {
          const uint4 wv = tile[i];
#pragma unroll
          for (int m = 0; m < M; ++m) dot8_bf16(wv, __ldg(xc + m * k8 + i), acc[m]);
        }
      }
      mbar_arrive(&empty[s]);  // every consumer thread (mbar_init_ring)
    }
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = warp_sum(acc[m]);
    if constexpr (GATED) {
      // The up warps hand their sums to the gate warps of the same features.
      constexpr int kHalf = kRows / 2;
      if (warp >= kHalf && lane == 0)
#pragma unroll
        for (int m = 0; m < M; ++m) up_acc[(warp - kHalf) * 8 + m] = acc[m];
      consumers_sync(kRows * 32);
      if (warp < kHalf && lane == 0 && valid) {
        const int64_t feature = g * kHalf + warp;
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const float gate = acc[m];
          // silu(g) = g / (1 + exp(-g)), the form the CPU op and torch evaluate.
          out.y[0][m * half + feature] =
              from_float<TOut>(gate / (1.0f + expf(-gate)) * up_acc[warp * 8 + m]);
        }
      }
      consumers_sync(kRows * 32);  // up_acc is read before the next group's sums land in it
    } else {
      if (lane == 0 && valid) write_feature<M>(out, bias, g * kRows + warp, acc);
    }
  }
}

template <typename TOut, bool GATED>
void launch(const bf16* xp, const bf16* wp, const TOut* bp, const OutSegments<TOut>& yp, int64_t m,
            int64_t n, int64_t k, cudaStream_t stream) {
  static int slots = 0;  // persistent blocks: as many as fit on the device at once
  if (slots == 0) {
    int device = 0, sms = 0, per_sm = 0;
    KITE_CUDA_CHECK(cudaGetDevice(&device));
    KITE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    auto raise = [](auto kernel) {
      KITE_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    };
    for (int64_t rows = 1; rows <= kGemvMaxRows; ++rows)
      with_rows(rows, [&](auto r) { raise(gemv_bulk_kernel<decltype(r)::value, TOut, GATED>); });
    KITE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, gemv_bulk_kernel<8, TOut, GATED>, kThreads, kSmemBytes));
    slots = sms * (per_sm > 0 ? per_sm : 1);
  }
  const int64_t groups = GATED ? (n / 2 + kRows / 2 - 1) / (kRows / 2) : (n + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(groups < slots ? groups : slots));
  with_rows(m, [&](auto rows) {
    launch_pdl(gemv_bulk_kernel<decltype(rows)::value, TOut, GATED>, grid, kThreads, kSmemBytes,
               stream, xp, wp, bp, yp, n, k);
  });
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename TOut>
void launch_gemv_bulk(const bf16* x, const bf16* w, const TOut* bias, const OutSegments<TOut>& out,
                      int64_t m, int64_t n, int64_t k, bool gated, cudaStream_t stream) {
  if (gated)
    launch<TOut, true>(x, w, bias, out, m, n, k, stream);
  else
    launch<TOut, false>(x, w, bias, out, m, n, k, stream);
}

template void launch_gemv_bulk<float>(const bf16*, const bf16*, const float*,
                                      const OutSegments<float>&, int64_t, int64_t, int64_t, bool,
                                      cudaStream_t);
template void launch_gemv_bulk<bf16>(const bf16*, const bf16*, const bf16*,
                                     const OutSegments<bf16>&, int64_t, int64_t, int64_t, bool,
                                     cudaStream_t);

}  // namespace kite::cuda
