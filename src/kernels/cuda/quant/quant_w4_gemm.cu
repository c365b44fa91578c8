// The W4A16 GEMM for batches past decode sizes (9 <= M <= kW4GemmMaxRows): 128 weight rows per
// block, the block's tokens (16, 32 or 64) staged once in shared memory for all of its warps.
// Why: the tensor-core kernel before it (qmma_kernel, quant_linear.cu) gave each 32-row block
// and each of its warps its own pass over the activations through L1, so at M = 64 the blocks
// of a 4096-row weight moved ~16x more activation bytes from L2 than the 4-bit weight's own
// bytes, and Llama-3-8B INT4 decoded batch 64 slower than BF16 (BENCHMARKS.md, run 20).
//
// Work: a block is WARPS warps of RT 16-row weight tiles each (128 rows), NT token tiles of 8
// (tokens blockIdx.x * NT * 8 ..; x varies fastest, so the token blocks of one row block run
// side by side and read its codes from L2 after the first), and one of `splits` slices of K
// (blockIdx.z; split-K where the row and token blocks alone would leave SMs idle). Stages of
// two 64-channel chunks go through a cp.async ring of kStages: the block's codes (the device
// layout's 512-byte tile chunks), the chunks' group scales and zeros of its 128 rows, and x
// [tokens, 128 channels] with a 16-byte pad per token row so a warp's fragment loads (8 tokens
// x 4 lanes, 32 bytes apart) hit distinct banks. A warp dequantizes its tiles' A fragments once
// a chunk (w4_frag, as every W4 kernel) and runs them against each token tile's B fragments.
// Each chunk's fp32 products are scaled by the group scale as the other W4 kernels do.
//
// Split-K: every slice writes its fp32 partial sums to `partials` [splits, m, n_pad]; the
// slice that arrives last at its (token block, row block) counter adds them in slice order
// (deterministic whichever arrives last), finishes the outputs and zeroes the counter for the
// next launch on the stream (launches on one stream never overlap: this kernel is launched in
// plain stream order and does not trigger an early start of the next).
#include <cuda_bf16.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "kernels/cuda/attention/mma_tile.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant/quant_geometry.h"
#include "kernels/cuda/quant/quant_kernel.cuh"
#include "kernels/cuda/stream.h"

namespace kite::cuda::quant_detail {
namespace {

using attention::mma::cp_async16;
using attention::mma::cp_async_commit;
using attention::mma::cp_async_wait;

constexpr int kBlockRows = 128;
constexpr int kBlockTiles = kBlockRows / 16;
constexpr int kStageChunks = 2;
constexpr int kStages = 4;
constexpr int kXPitch = 64 * 2 + 16;  // bytes per token row of one chunk in shared memory

template <int NT>
struct Layout {
  static constexpr int kTokens = NT * 8;
  static constexpr int kCodeBytes = kBlockTiles * kStageChunks * 512;
  static constexpr int kScaleBytes = kStageChunks * kBlockRows * 4;
  static constexpr int kZeroBytes = kStageChunks * kBlockRows;
  static constexpr int kXBytes = kStageChunks * kTokens * kXPitch;
  static constexpr int kStageBytes = kCodeBytes + kScaleBytes + kZeroBytes + kXBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes;
};

// Counters of arrived slices, one per (token block, row block) of a launch, for each stream
// that launches the split form; zero at module load, and every launch leaves them zero.
constexpr int kCounterStreams = 64;
constexpr int kCountersPerStream = 512;
__device__ uint32_t g_w4_gemm_counters[kCounterStreams * kCountersPerStream];

uint32_t* stream_counters(cudaStream_t stream) {
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  static uint32_t* base = nullptr;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!base)
    KITE_CUDA_CHECK(cudaGetSymbolAddress(reinterpret_cast<void**>(&base), g_w4_gemm_counters));
  auto it = std::find(streams.begin(), streams.end(), stream);
  if (it == streams.end()) {
    KITE_CUDA_OP_CHECK(streams.size() < kCounterStreams, "quantized_linear",
                       "the split W4A16 GEMM serves at most 64 streams");
    streams.push_back(stream);
    it = streams.end() - 1;
  }
  return base + kCountersPerStream * (it - streams.begin());
}

template <int NT, int RT, int WARPS, typename TOut>
__global__ void __launch_bounds__(WARPS * 32) w4_gemm_kernel(const KParams p, float* partials,
                                                            uint32_t* counters, int splits) {
  static_assert(RT * WARPS == kBlockTiles, "a block is 128 rows");
  using L = Layout<NT>;
  constexpr int kThreads = WARPS * 32;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int tok0 = blockIdx.x * L::kTokens;
  const int tile0 = blockIdx.y * kBlockTiles;  // the block's first 16-row tile
  const int tiles = p.n_pad / 16;
  // This slice's chunks, whole stages except the last.
  const int per = (p.nchunks + splits - 1) / splits;
  const int per_split = (per + kStageChunks - 1) / kStageChunks * kStageChunks;
  const int c_begin = min(p.nchunks, static_cast<int>(blockIdx.z) * per_split);
  const int c_end = min(p.nchunks, c_begin + per_split);
  const int stages = (c_end - c_begin + kStageChunks - 1) / kStageChunks;

  auto stage_ptr = [&](int slot) { return smem + slot * L::kStageBytes; };
  auto load_stage = [&](int st) {
    uint8_t* base = stage_ptr(st % kStages);
    const int cs = c_begin + st * kStageChunks;
    // Codes: kBlockTiles x kStageChunks pieces of 512 bytes, 32 copies each.
    for (int i = tid; i < kBlockTiles * kStageChunks * 32; i += kThreads) {
      const int tl = i / (kStageChunks * 32), s = (i / 32) % kStageChunks, q = i % 32;
      const int c = cs + s, tile = tile0 + tl;
      const bool ok = c < c_end && tile < tiles;
      const uint8_t* src =
          ok ? p.codes + (static_cast<int64_t>(tile) * p.nchunks + c) * 512 + q * 16 : p.codes;
      cp_async16(base + (tl * kStageChunks + s) * 512 + q * 16, src, ok);
    }
    // Group scales (4 rows a copy) and zeros (16 rows a copy) of the 128 rows, per chunk.
    uint8_t* sbase = base + L::kCodeBytes;
    uint8_t* zbase = sbase + L::kScaleBytes;
    for (int i = tid; i < kStageChunks * (kBlockRows / 4 + kBlockRows / 16); i += kThreads) {
      const int s = i / (kBlockRows / 4 + kBlockRows / 16), r = i % (kBlockRows / 4 + kBlockRows / 16);
      const int c = cs + s;
      const bool scale = r < kBlockRows / 4;
      const int row = tile0 * 16 + (scale ? r * 4 : (r - kBlockRows / 4) * 16);
      const bool ok = c < c_end && row < p.n_pad;
      const int64_t o = ok ? static_cast<int64_t>(group_of_chunk(p, c)) * p.n_pad + row : 0;
      if (scale)
        cp_async16(sbase + (s * kBlockRows + r * 4) * 4, p.wscale + o, ok);
      else
        cp_async16(zbase + s * kBlockRows + (r - kBlockRows / 4) * 16, p.zeros + o, ok);
    }
    // Activations: tokens x chunks x 8 copies of 16 bytes (zeros past M).
    uint8_t* xbase = zbase + L::kZeroBytes;
    for (int i = tid; i < L::kTokens * kStageChunks * 8; i += kThreads) {
      const int tk = i / (kStageChunks * 8), s = (i / 8) % kStageChunks, q = i % 8;
      const int c = cs + s, tok = tok0 + tk;
      const bool ok = c < c_end && tok < p.m;
      const bf16* src = ok ? static_cast<const bf16*>(p.x) + static_cast<int64_t>(tok) * p.ldx +
                                 c * kChunk + q * 8
                           : static_cast<const bf16*>(p.x);
      cp_async16(xbase + (s * L::kTokens + tk) * kXPitch + q * 16, src, ok);
    }
  };

  float acc[RT][NT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][j][i] = 0.0f;

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < stages) load_stage(st);
    cp_async_commit();
  }
  for (int st = 0; st < stages; ++st) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage st landed for every thread; the slot refilled below is free
    if (st + kStages - 1 < stages) load_stage(st + kStages - 1);
    cp_async_commit();
    const uint8_t* base = stage_ptr(st % kStages);
    const float* sc = reinterpret_cast<const float*>(base + L::kCodeBytes);
    const uint8_t* zs = base + L::kCodeBytes + L::kScaleBytes;
    const uint8_t* xs = zs + L::kZeroBytes;
#pragma unroll
    for (int s = 0; s < kStageChunks; ++s) {
      if (c_begin + st * kStageChunks + s >= c_end) break;
      uint32_t a[RT][4][4];
      float s0[RT], s1[RT];
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const int tl = warp * RT + r;
        const uint4 wv = reinterpret_cast<const uint4*>(base + (tl * kStageChunks + s) * 512)[lane];
        const int rl = tl * 16 + g;
        s0[r] = sc[s * kBlockRows + rl];
        s1[r] = sc[s * kBlockRows + rl + 8];
        const uint32_t z0 = w4_zero2(zs[s * kBlockRows + rl]);
        const uint32_t z1 = w4_zero2(zs[s * kBlockRows + rl + 8]);
#pragma unroll
        for (int h = 0; h < 4; ++h) w4_frag(word(wv, h), z0, z1, a[r][h]);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const uint8_t* xr = xs + (s * L::kTokens + j * 8 + g) * kXPitch + 32 * t;
        const uint4 xv[2] = {*reinterpret_cast<const uint4*>(xr),
                             *reinterpret_cast<const uint4*>(xr + 16)};
#pragma unroll
        for (int r = 0; r < RT; ++r) {
          float ct[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int h = 0; h < 4; ++h)
            mma_bf16(ct, a[r][h], word(xv[h >> 1], (h & 1) * 2), word(xv[h >> 1], (h & 1) * 2 + 1));
          acc[r][j][0] = fmaf(ct[0], s0[r], acc[r][j][0]);
          acc[r][j][1] = fmaf(ct[1], s0[r], acc[r][j][1]);
          acc[r][j][2] = fmaf(ct[2], s1[r], acc[r][j][2]);
          acc[r][j][3] = fmaf(ct[3], s1[r], acc[r][j][3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may still land in shared memory as the block exits

  auto for_each_output = [&](auto&& fn) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = (tile0 + warp * RT + r) * 16 + g + (i >= 2 ? 8 : 0);
          const int tok = tok0 + j * 8 + 2 * t + (i & 1);
          if (row < p.n && tok < p.m) fn(row, tok, acc[r][j][i]);
        }
  };
  if (splits == 1) {
    for_each_output([&](int row, int tok, float v) { finish_output<kW4, TOut>(p, tok, row, v); });
    return;
  }
  const int64_t slice = static_cast<int64_t>(p.m) * p.n_pad;
  float* mine = partials + blockIdx.z * slice;
  for_each_output(
      [&](int row, int tok, float v) { mine[static_cast<int64_t>(tok) * p.n_pad + row] = v; });
  __threadfence();  // this slice's partials are visible device-wide before it counts
  __syncthreads();
  __shared__ bool last;
  if (tid == 0) {
    uint32_t* counter = counters + blockIdx.y * gridDim.x + blockIdx.x;
    last = atomicAdd(counter, 1u) == static_cast<uint32_t>(splits - 1);
    if (last) atomicExch(counter, 0u);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for_each_output([&](int row, int tok, float) {
    float v = 0.0f;
    for (int z = 0; z < splits; ++z)  // in slice order, read through L2 (other blocks wrote them)
      v += __ldcg(partials + z * slice + static_cast<int64_t>(tok) * p.n_pad + row);
    finish_output<kW4, TOut>(p, tok, row, v);
  });
}

template <int NT>
int token_blocks(int m) {
  return (m + NT * 8 - 1) / (NT * 8);
}

// Token tiles per block for M rows: 2, 4 or 8 (16, 32 or 64 tokens).
int tiles_for(int m) { return m <= 16 ? 2 : m <= 32 ? 4 : 8; }

template <int NT, int RT, int WARPS, typename TOut>
void launch(const KParams& p, int splits, float* partials, cudaStream_t stream) {
  using L = Layout<NT>;
  static const bool ready = [] {
    KITE_CUDA_CHECK(cudaFuncSetAttribute(w4_gemm_kernel<NT, RT, WARPS, TOut>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         L::kSmemBytes));
    return true;
  }();
  (void)ready;
  const dim3 grid(static_cast<unsigned>(token_blocks<NT>(p.m)),
                  static_cast<unsigned>((p.n_pad / 16 + kBlockTiles - 1) / kBlockTiles),
                  static_cast<unsigned>(splits));
  uint32_t* counters = splits > 1 ? stream_counters(stream) : nullptr;
  w4_gemm_kernel<NT, RT, WARPS, TOut>
      <<<grid, WARPS * 32, L::kSmemBytes, stream>>>(p, partials, counters, splits);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

int w4_gemm_splits(int64_t m, int64_t n_pad, int64_t nchunks, int forced) {
  const int nt = tiles_for(static_cast<int>(m));
  const int64_t blocks = ((m + nt * 8 - 1) / (nt * 8)) * ((n_pad / 16 + kBlockTiles - 1) / kBlockTiles);
  int splits = 1;
  if (forced > 0) {
    splits = forced;
  } else {
    const int64_t sms = device_properties().multiProcessorCount;
    // Enough slices for about one block per SM, each at least 8 chunks (512 channels) long.
    if (blocks < sms) splits = static_cast<int>(std::min<int64_t>((sms + blocks - 1) / blocks, 8));
    splits = static_cast<int>(std::min<int64_t>(splits, std::max<int64_t>(1, nchunks / 8)));
  }
  // The counters: one per (token block, row block) of a split launch.
  if (blocks > kCountersPerStream) splits = 1;
  return std::max(splits, 1);
}

template <typename TOut>
void launch_w4_gemm(const KParams& p, int splits, float* partials, cudaStream_t stream) {
  switch (tiles_for(p.m)) {
    case 2:
      return launch<2, 1, 8, TOut>(p, splits, partials, stream);
    case 4:
      return launch<4, 1, 8, TOut>(p, splits, partials, stream);
    default:
      return launch<8, 2, 4, TOut>(p, splits, partials, stream);
  }
}

template void launch_w4_gemm<float>(const KParams&, int, float*, cudaStream_t);
template void launch_w4_gemm<bf16>(const KParams&, int, float*, cudaStream_t);

}  // namespace kite::cuda::quant_detail
