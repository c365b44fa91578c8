// The W4A16 GEMM for batches past decode sizes (9 <= M <= 128) on weights whose 128-row blocks
// fill the GPU by themselves (Llama-3-8B's stacked gate_up: 224 blocks): 128 weight rows per
// block, the block's tokens (16, 32 or 64) staged once in shared memory for all of its warps.
// Why: the tensor-core kernel (qmma_kernel, quant_linear.cu) gives each 32-row block and each of
// its warps its own pass over the activations through L1; on the stacked gate_up at M = 64 that
// took 128 us against BF16's 64, this kernel 81-89 (BENCHMARKS.md, run 20). Narrower weights stay
// on qmma_kernel: with too few row blocks this kernel needed split-K, and its 16-row warp tiles
// read ~256 bytes of x from shared memory per MMA, which lost to qmma_kernel there.
//
// Work: a block is 8 warps of one 16-row weight tile each (128 rows), NT token tiles of 8
// (tokens blockIdx.x * NT * 8 ..; x varies fastest, so the token blocks of one row block run
// side by side and read its codes from L2 after the first). Stages of SCH 64-channel chunks go
// through a cp.async ring of STAGES: the block's codes (the device layout's 512-byte tile
// chunks), the chunks' group scales and zeros of its 128 rows, and x [tokens, SCH x 64
// channels] with a 16-byte pad per token row so a warp's fragment loads (8 tokens x 4 lanes,
// 32 bytes apart) hit distinct banks. A warp dequantizes its tile's A fragments once a chunk
// (w4_frag, as every W4 kernel) and runs them against each token tile's B fragments; each
// chunk's fp32 products are scaled by the group scale as the other W4 kernels do, so the
// numerics are qmma_kernel's.
#include <cuda_bf16.h>

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
constexpr int kBlockTiles = kBlockRows / 16;  // = warps per block: one 16-row tile each
constexpr int kThreads = kBlockTiles * 32;
constexpr int kXPitch = 64 * 2 + 16;  // bytes per token row of one chunk in shared memory

// NT token tiles of 8; stages of SCH chunks in a ring of STAGES.
template <int NT, int SCH, int STAGES>
struct Layout {
  static constexpr int kTokens = NT * 8;
  static constexpr int kCodeBytes = kBlockTiles * SCH * 512;
  static constexpr int kScaleBytes = SCH * kBlockRows * 4;
  static constexpr int kZeroBytes = SCH * kBlockRows;
  static constexpr int kXBytes = SCH * kTokens * kXPitch;
  static constexpr int kStageBytes = kCodeBytes + kScaleBytes + kZeroBytes + kXBytes;
  static constexpr int kSmemBytes = STAGES * kStageBytes;
};

// Token tiles of 8 per block for M rows: 2, 4 or 8 (16, 32 or 64 tokens).
int tiles_for(int64_t m) { return m <= 16 ? 2 : m <= 32 ? 4 : 8; }

// Blocks for M rows of an n_pad-row weight: token blocks (x, fastest) by 128-row blocks (y).
dim3 grid_for(int64_t m, int64_t n_pad) {
  return dim3(static_cast<unsigned>(ceil_div(m, tiles_for(m) * 8)),
              static_cast<unsigned>(ceil_div(n_pad, kBlockRows)));
}

// Two blocks per SM, as the 64-token ring's shared memory allows (2 x 111 KB): the register cap
// (128) this sets is what every configuration used when measured, with no spills.
template <int NT, int SCH, int STAGES, typename TOut>
__global__ void __launch_bounds__(kThreads, 2) w4_gemm_kernel(const KParams p) {
  using L = Layout<NT, SCH, STAGES>;
  constexpr int kStageChunks = SCH;
  constexpr int kStages = STAGES;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int tok0 = blockIdx.x * L::kTokens;
  const int tile0 = blockIdx.y * kBlockTiles;  // the block's first 16-row tile
  const int tiles = p.n_pad / 16;
  const int stages = (p.nchunks + kStageChunks - 1) / kStageChunks;

  auto stage_ptr = [&](int slot) { return smem + slot * L::kStageBytes; };
  auto load_stage = [&](int st) {
    uint8_t* base = stage_ptr(st % kStages);
    const int cs = st * kStageChunks;
    // Codes: kBlockTiles x kStageChunks pieces of 512 bytes, 32 copies each.
    for (int i = tid; i < kBlockTiles * kStageChunks * 32; i += kThreads) {
      const int tl = i / (kStageChunks * 32), s = (i / 32) % kStageChunks, q = i % 32;
      const int c = cs + s, tile = tile0 + tl;
      const bool ok = c < p.nchunks && tile < tiles;
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
      const bool ok = c < p.nchunks && row < p.n_pad;
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
      const bool ok = c < p.nchunks && tok < p.m;
      const bf16* src = ok ? static_cast<const bf16*>(p.x) + static_cast<int64_t>(tok) * p.ldx +
                                 c * kChunk + q * 8
                           : static_cast<const bf16*>(p.x);
      cp_async16(xbase + (s * L::kTokens + tk) * kXPitch + q * 16, src, ok);
    }
  };

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < stages) load_stage(st);
    cp_async_commit();
  }
  const int rl = warp * 16 + g;  // this lane's rows rl and rl + 8 within the block
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
      if (st * kStageChunks + s >= p.nchunks) break;
      const uint4 wv = reinterpret_cast<const uint4*>(base + (warp * kStageChunks + s) * 512)[lane];
      const float s0 = sc[s * kBlockRows + rl], s1 = sc[s * kBlockRows + rl + 8];
      const uint32_t z0 = w4_zero2(zs[s * kBlockRows + rl]);
      const uint32_t z1 = w4_zero2(zs[s * kBlockRows + rl + 8]);
      uint32_t a[4][4];
#pragma unroll
      for (int h = 0; h < 4; ++h) w4_frag(word(wv, h), z0, z1, a[h]);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const uint8_t* xr = xs + (s * L::kTokens + j * 8 + g) * kXPitch + 32 * t;
        const uint4 xv[2] = {*reinterpret_cast<const uint4*>(xr),
                             *reinterpret_cast<const uint4*>(xr + 16)};
        float ct[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 4; ++h)
          mma_bf16(ct, a[h], word(xv[h >> 1], (h & 1) * 2), word(xv[h >> 1], (h & 1) * 2 + 1));
        acc[j][0] = fmaf(ct[0], s0, acc[j][0]);
        acc[j][1] = fmaf(ct[1], s0, acc[j][1]);
        acc[j][2] = fmaf(ct[2], s1, acc[j][2]);
        acc[j][3] = fmaf(ct[3], s1, acc[j][3]);
      }
    }
  }
  cp_async_wait<0>();  // no copy may still land in shared memory as the block exits

#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = (tile0 + warp) * 16 + g + (i >= 2 ? 8 : 0);
      const int tok = tok0 + j * 8 + 2 * t + (i & 1);
      if (row < p.n && tok < p.m) finish_output<kW4, TOut>(p, tok, row, acc[j][i]);
    }
}

template <int NT, int SCH, int STAGES, typename TOut>
void launch(const KParams& p, cudaStream_t stream) {
  using L = Layout<NT, SCH, STAGES>;
  auto kernel = w4_gemm_kernel<NT, SCH, STAGES, TOut>;
  static const bool ready = [&] {
    KITE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kSmemBytes));
    return true;
  }();
  (void)ready;
  kernel<<<grid_for(p.m, p.n_pad), kThreads, L::kSmemBytes, stream>>>(p);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool w4_gemm_fills_gpu(int64_t m, int64_t n_pad) {
  const dim3 grid = grid_for(m, n_pad);
  return static_cast<int64_t>(grid.x) * grid.y >= device_properties().multiProcessorCount;
}

// The configurations measured best on the H200 (BENCHMARKS.md, run 20): 16 tokens in stages
// of 4 chunks (gate_up at M = 16: 40.3 us against 52.1 with stages of 2); 32 and 64 tokens in
// stages of 2; one tile per warp (64 tokens: 80.9 us at M = 64 against 88.9 on 4 warps of two
// tiles, which halved the shared-memory reads but left too few warps to cover the MMAs).
template <typename TOut>
void launch_w4_gemm(const KParams& p, cudaStream_t stream) {
  switch (tiles_for(p.m)) {
    case 2:
      return launch<2, 4, 4, TOut>(p, stream);
    case 4:
      return launch<4, 2, 4, TOut>(p, stream);
    default:
      return launch<8, 2, 4, TOut>(p, stream);
  }
}

template void launch_w4_gemm<float>(const KParams&, cudaStream_t);
template void launch_w4_gemm<bf16>(const KParams&, cudaStream_t);

}  // namespace kite::cuda::quant_detail
