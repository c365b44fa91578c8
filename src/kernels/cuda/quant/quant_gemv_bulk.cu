// The quantized decode GEMV (M <= 8; FP8 / INT8 to 16 rows) as a stream through shared memory, the
// quantized twin of gemm/gemv_bulk.cu: one persistent block per SM, one producer thread copying the
// weight's codes with Hopper's bulk copy engine (cp.async.bulk) into a ring of ~128 KB (W4: 8
// stages of 16 KB, 8-bit: 4 of 33 KB) while 16 consumer warps run the same tensor-core MMAs and
// fragment orders as qdec_kernel (quant_linear.cu) on it. Why: the register-ring decode kernel and
// the tensor-core kernel keep a few 16-byte loads per lane in flight, which left the per-channel
// FP8/INT8 GEMVs at ~2.2-2.4 TB/s on the H200; this one streams them at ~2.7-3.0 TB/s
// (BENCHMARKS.md, run 6). W4A16 stays on qdec_kernel by default: here its consumers (dequant,
// MMA chains and group-scale loads) and not the copies set the pace (~1.5 against ~1.9 TB/s).
//
// Work: 16-row weight tiles (the device layouts' MMA tiles) b, b + gridDim.x, ... per block;
// each tile streamed in stages of 32 64-channel chunks; every consumer warp takes its
// consecutive chunks of each stage, so all warps accumulate the same 16 rows, and their partial
// sums are added in warp order (deterministic) when the tile's last stage is done. Operands
// other than the codes (activations, W4 scales and zeros) are loaded one stage ahead. W4 stages
// are contiguous in the layout (copied in four 4 KB parts); 8-bit stages are 16 row copies,
// stored with a 64-byte pad per row so the lanes' fragment loads (rows g and g + 8) hit
// distinct banks.
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/env_switch.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/quant/quant_geometry.h"
#include "kernels/cuda/quant/quant_kernel.cuh"
#include "kernels/cuda/stream.h"
#include "quant/activation_scale.h"

namespace kite::cuda::quant_detail {
namespace {

constexpr int kTileRows = 16;

// 16 consumer warps and W4 stages in four 4 KB copies: the best of the five (warps, copies)
// pairs measured at model level (BENCHMARKS.md, run 6).
constexpr int kWarps = 16;
constexpr int kThreads = (kWarps + 1) * 32;
constexpr int kW4Pieces = 4;

// 32 chunks (2,048 input channels) per stage: W4 stages are 16 KB, 8-bit stages 16 row copies
// of 2 KB (with 16-chunk stages, 1 KB row copies, FP8 streamed at ~2.1 TB/s against ~2.7-2.9
// with these; BENCHMARKS.md, run 6).
// The consumers' in-block activation quantization (KParams::xq_src), the act_quant_token
// kernel's arithmetic (quant_activation.cu) so the codes and scales are bit-identical: per row,
// amax over all K (a max, so the order of the reduction does not matter), s and the codes as
// quant/activation_scale.h defines them into xq [m, kpad] (zeros past k_real), s into xs [m]. Saves
// the separate single-block quantization kernel before each FP8 / INT8 decode GEMV.
// Up to kHeld 16-byte loads a thread are kept in registers between the amax and the encoding
// (K <= 16,384): one L2 round trip on the GEMV's critical path instead of two. Longer rows read
// x again in the second pass.
constexpr int kHeld = 4;
static_assert(kHeld * kWarps * 32 * 8 == kFoldedNormMaxK, "a folded norm's rows are held");

// A folded norm's weight (KParams::norm_weight), each consumer thread's held elements: never
// written by an earlier kernel, so loaded before pdl_wait.
struct NormWeight {
  uint4 v[kHeld];
};
__device__ void load_norm_weight(const KParams& p, NormWeight& w) {
  constexpr int kN = kWarps * 32;
#pragma unroll
  for (int j = 0; j < kHeld; ++j) {
    const int64_t i = static_cast<int64_t>(threadIdx.x + j * kN) * 8;
    w.v[j] = i < p.k_real ? __ldg(reinterpret_cast<const uint4*>(p.norm_weight + i))
                          : make_uint4(0, 0, 0, 0);
  }
}

// With a folded norm (KParams::norm_residual) the rows are first made as add_rms_norm makes them
// (norm.cu: each thread's elements and sums in its order, the block sum as block_sum's), which
// spares the norm's launch and the dependency hop between it and this GEMV; each block stores
// its share of residual + x into norm_residual_out (every block reads all of norm_residual, so
// it cannot be written in place).
template <bool kInt8>
__device__ void quantize_rows_into_smem(const KParams& p, int64_t kpad, uint8_t* xq, float* xs,
                                        float* scratch, const NormWeight& nw) {
  constexpr int kN = kWarps * 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const bool held = p.k_real <= static_cast<int64_t>(kHeld) * kN * 8;
  const bool fold = p.norm_residual != nullptr;  // the host checks held
  float* sum_scratch = scratch + kWarps;
  for (int r = 0; r < p.m; ++r) {
    const bf16* xr = p.xq_src + static_cast<int64_t>(r) * p.k_real;
    uint4 v[kHeld];
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      const int64_t i = static_cast<int64_t>(tid + j * kN) * 8;
      v[j] = held && i < p.k_real ? __ldg(reinterpret_cast<const uint4*>(xr + i))
                                  : make_uint4(0, 0, 0, 0);
    }
    if (fold) {
      const int64_t row = static_cast<int64_t>(r) * p.k_real;
      uint4 rv[kHeld];
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {  // written by an earlier kernel: not __ldg
        const int64_t i = static_cast<int64_t>(tid + j * kN) * 8;
        rv[j] = i < p.k_real ? *reinterpret_cast<const uint4*>(p.norm_residual + row + i)
                             : make_uint4(0, 0, 0, 0);
      }
      float sum_sq = 0.0f;
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {
        const int64_t vi = tid + j * kN, i = vi * 8;
        if (i >= p.k_real) continue;
        bf16* e = reinterpret_cast<bf16*>(&v[j]);
        const bf16* re = reinterpret_cast<const bf16*>(&rv[j]);
#pragma unroll
        for (int h = 0; h < 8; ++h) {
          e[h] = __float2bfloat16(__bfloat162float(e[h]) + __bfloat162float(re[h]));
          const float f = __bfloat162float(e[h]);
          sum_sq += f * f;
        }
        if (vi % gridDim.x == blockIdx.x)  // this block's share of the new residual
          *reinterpret_cast<uint4*>(p.norm_residual_out + row + i) = v[j];
      }
      sum_sq = warp_sum(sum_sq);
      if (lane == 0) sum_scratch[warp] = sum_sq;
      consumers_sync(kN);
      sum_sq = warp_sum(lane < kWarps ? sum_scratch[lane] : 0.0f);
      const float inv_rms = rsqrtf(sum_sq / static_cast<float>(p.k_real) + p.norm_eps);
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {
        bf16* e = reinterpret_cast<bf16*>(&v[j]);
        const bf16* we = reinterpret_cast<const bf16*>(&nw.v[j]);
#pragma unroll
        for (int h = 0; h < 8; ++h) {
          const float normed = __bfloat162float(__float2bfloat16(__bfloat162float(e[h]) * inv_rms));
          e[h] = __float2bfloat16(normed * __bfloat162float(we[h]));
        }
      }
    }
    float amax = 0.0f;
    if (held) {
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {
        const int64_t i = static_cast<int64_t>(tid + j * kN) * 8;
        if (i >= p.k_real) break;  // input_scale has k_real entries
        const bf16* e = reinterpret_cast<const bf16*>(&v[j]);
#pragma unroll
        for (int h = 0; h < 8; ++h)
          amax = fmaxf(amax, fabsf(input_scaled(__bfloat162float(e[h]), p.xq_in_scale, i + h)));
      }
    } else {
      for (int64_t i = tid * 8; i < p.k_real; i += kN * 8) {
        const uint4 w = __ldg(reinterpret_cast<const uint4*>(xr + i));
        const bf16* e = reinterpret_cast<const bf16*>(&w);
#pragma unroll
        for (int h = 0; h < 8; ++h)
          amax = fmaxf(amax, fabsf(input_scaled(__bfloat162float(e[h]), p.xq_in_scale, i + h)));
      }
    }
    amax = warp_max(amax);
    if (lane == 0) scratch[warp] = amax;
    consumers_sync(kN);
    amax = warp_max(scratch[lane % kWarps]);
    const float s = activation_scale(amax, kInt8 ? 127.0f : 448.0f), inv = __frcp_rn(s);
    auto encode = [&](int64_t i, const uint4& w) {
      uint32_t c[2] = {0, 0};
      if (i < p.k_real) {
        const bf16* e = reinterpret_cast<const bf16*>(&w);
#pragma unroll
        for (int h = 0; h < 8; ++h) {
          const float f = input_scaled(__bfloat162float(e[h]), p.xq_in_scale, i + h);
          c[h / 4] |= static_cast<uint32_t>(encode8<kInt8>(f * inv)) << (8 * (h % 4));
        }
      }
      *reinterpret_cast<uint2*>(xq + r * kpad + i) = make_uint2(c[0], c[1]);
    };
    if (held) {
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {
        const int64_t i = static_cast<int64_t>(tid + j * kN) * 8;
        if (i < kpad) encode(i, v[j]);
      }
      // kpad rounds K up to a whole chunk, so it may pass the held range (zeros there).
      for (int64_t i = static_cast<int64_t>(tid + kHeld * kN) * 8; i < kpad; i += kN * 8)
        *reinterpret_cast<uint2*>(xq + r * kpad + i) = make_uint2(0, 0);
    } else {
      for (int64_t i = tid * 8; i < kpad; i += kN * 8)
        encode(i, i < p.k_real ? __ldg(reinterpret_cast<const uint4*>(xr + i))
                               : make_uint4(0, 0, 0, 0));
    }
    if (tid == 0) xs[r] = s;
    consumers_sync(kN);  // the codes and xs are published; scratch may be reused
  }
}

template <int F, int NT = 1>
struct Geometry {
  static constexpr bool kW4F = F == kW4;
  static constexpr int kStageChunks = 32;
  static constexpr int kStages = kW4F ? 8 : 4;
  static constexpr int kWarpChunks = kStageChunks / kWarps;
  static constexpr int kRowPitch = kStageChunks * 64 + 64;  // 8-bit: one tile row in smem
  static constexpr int kStageBytes = kW4F ? kStageChunks * 512 : kTileRows * kRowPitch;
  // Stages, full and empty barriers, then two [NT][kWarps][4][32] partial-sum buffers (tiles
  // alternate, so one consumer barrier per tile suffices).
  static constexpr int kSmemBytes =
      kStages * kStageBytes + 2 * kStages * 8 + 2 * NT * kWarps * 128 * 4;
};

// FQ: the consumers quantize the activations in-block (KParams::xq_src, 8-bit formats). A
// separate instantiation, so the plain kernel keeps its code and its shared-memory size (with
// one kernel for both, the plain FP8 path ran Llama-3-8B batch-1 decode 5 % slower).
// GATED (8-bit formats, BF16 out): the weight is a gated MLP's stacked [gate; up] [2n, K]; a
// tile is the gate rows of features 8t .. 8t + 7 above their up rows (n % 8 == 0), and y
// [m, n] = silu(gate) * up, computed from the fp32 sums, so no silu_mul launch follows.
// A16 (FP8 per channel, KParams::xq_a16): x is BF16 [m, ldx], read like W4's activations, and
// each lane turns its E4M3 codes (exactly) and x (times kA16XScale) into f16 for m16n8k16 MMAs
// (W8A16: no activation quantization, so no block-wide amax and divisions before the first MMA).
// NT (8-bit codes quantized by the kernel before, or A16): token tiles of 8 per MMA A fragment,
// so one pass over the weight serves 8 NT rows; each tile's x is one more 16-byte load a lane
// per chunk (A16 two; from L2, as many bytes as the weight's at 16 rows), its sums 4 more
// registers and 16 KB more of reduction buffers. Launched with NT = 2 (9-16 rows): 4 tiles (17-32
// rows) measured slower than cuBLASLt (FP8 down 4096 x 14336 at 32 rows 52.5 against 33.7 us, H100;
// ptxas spills at the 96 registers 544 threads allow; BENCHMARKS.md run 34).
template <int F, typename TOut, bool FQ, bool GATED, bool A16 = false, int NT = 1>
__global__ void __launch_bounds__(kThreads, 1) qgemv_bulk_kernel(const KParams p) {
  using G = Geometry<F, NT>;
  using Acc = std::conditional_t<F == kI8Ch, int, float>;
  constexpr bool kW4F = G::kW4F;
  constexpr int kStages = G::kStages;
  static_assert(!A16 || (F == kFp8Ch && !FQ), "BF16 activations are for FP8 per channel");
  static_assert(NT == 1 || (!kW4F && !FQ), "token tiles read 8-bit codes or BF16 x from global");
  // 16-byte activation loads per lane per chunk: W4 two, A16 two a token tile (j's at 2 j and
  // 2 j + 1), 8-bit codes one a token tile.
  constexpr int XL = kW4F ? 2 : A16 ? 2 * NT : NT;
  constexpr int WC = G::kWarpChunks;
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * G::kStageBytes);
  uint64_t* empty = full + kStages;
  Acc* red = reinterpret_cast<Acc*>(empty + kStages);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  static_assert(!GATED || F == kFp8Ch || F == kI8Ch, "gated tiles are for 8-bit codes");
  const int tiles = GATED ? p.n / (kTileRows / 2) : p.n_pad / kTileRows;
  const int spt = (p.nchunks + G::kStageChunks - 1) / G::kStageChunks;  // stages per tile
  const int my_tiles =
      static_cast<int>(blockIdx.x) < tiles ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const int items = my_tiles * spt;
  const int64_t kpad = static_cast<int64_t>(p.nchunks) * kChunk;
  if (threadIdx.x == 0) mbar_init_ring(full, empty, kStages, kWarps * 32);
  __syncthreads();

  if (warp == kWarps) {  // the producer: codes are never written by an earlier kernel, so their
    // stream starts before pdl_wait (while the kernel that writes x still runs) — but only its
    // first p.prewait_stages stages. A whole ring a block (~17 MB over the SMs for Llama-3-8B's
    // o_proj) copied while the kernel before still runs competes with that kernel's own reads:
    // with one stage, 8-bit batch 1 was 0.4-1.6 % faster, larger batches unchanged
    // (BENCHMARKS.md run 31; run 30 showed the contention on the split combine).
    if (lane == 0) {
      const uint64_t policy = l2_evict_first_policy();
      for (int item = 0; item < items; ++item) {
        if (item == p.prewait_stages && item > 0) pdl_wait();
        const int s = ring_slot_to_fill<kStages>(empty, item);
        const int tile = blockIdx.x + (item / spt) * gridDim.x;
        const int c0 = (item % spt) * G::kStageChunks;
        const int cnt = min(G::kStageChunks, p.nchunks - c0);
        uint8_t* dst = smem + s * G::kStageBytes;
        if constexpr (kW4F) {
          const uint32_t bytes = static_cast<uint32_t>(cnt) * 512;
          mbar_arrive_expect_tx(&full[s], bytes);
          const uint8_t* src = p.codes + (static_cast<int64_t>(tile) * p.nchunks + c0) * 512;
          constexpr uint32_t kPiece = G::kStageBytes / kW4Pieces;
          for (uint32_t o = 0; o < bytes; o += kPiece)
            bulk_copy_g2s(dst + o, src + o, bytes - o < kPiece ? bytes - o : kPiece, &full[s],
                          policy);
        } else {
          const uint32_t bytes = static_cast<uint32_t>(cnt) * kChunk;
          mbar_arrive_expect_tx(&full[s], bytes * kTileRows);
          const uint8_t* src =
              p.codes + static_cast<int64_t>(tile) * kTileRows * kpad + c0 * kChunk;
          for (int r = 0; r < kTileRows; ++r) {
            const uint8_t* row_src = src + r * kpad;
            if constexpr (GATED) {  // gate row 8 tile + r, or up row n + 8 tile + r - 8
              constexpr int kHalf = kTileRows / 2;
              const int64_t wrow = r < kHalf ? tile * kHalf + r : p.n + tile * kHalf + r - kHalf;
              row_src = p.codes + wrow * kpad + c0 * kChunk;
            }
            bulk_copy_g2s(dst + r * G::kRowPitch, row_src, bytes, &full[s], policy);
          }
        }
      }
    }
    return;
  }

  NormWeight norm_w;
  if constexpr (FQ) {
    if (p.norm_residual) load_norm_weight(p, norm_w);
  }
  pdl_wait();  // x (and its scales) come from the previous kernel
  pdl_trigger();
  const int g = lane >> 2, t = lane & 3;
  const bool tok_ok = g < p.m;  // this lane's B-fragment token (of the first token tile)
  // In-block quantization (8-bit formats): codes [m, kpad], then scales, then a reduction's
  // scratch, after the ring's shared memory.
  static_assert(!FQ || F == kFp8Ch || F == kI8Ch, "in-block quantization is for 8-bit codes");
  uint8_t* xq = smem + G::kSmemBytes;
  float* xq_scale = reinterpret_cast<float*>(xq + p.m * kpad);
  if constexpr (FQ)
    quantize_rows_into_smem<F == kI8Ch>(p, kpad, xq, xq_scale, xq_scale + 8, norm_w);
  // What a stage's MMAs need besides the stage itself: activations, W4 scales and zeros. They
  // are loaded one item ahead (their L2 latency is most of a stage's time budget at the read
  // roofline, so loading them after the stage lands stalls the ring).
  struct Operands {
    uint4 xv[WC][XL];
    float ws[WC][2];
    uint32_t wz[WC][2];
  };
  auto load_operands = [&](int item, Operands& o) {
    const int tile = blockIdx.x + (item / spt) * gridDim.x;
    const int row_g = tile * kTileRows + g;
    const int cw = (item % spt) * G::kStageChunks + warp * WC;
#pragma unroll
    for (int u = 0; u < WC; ++u) {
      const int c = cw + u;
      const bool on = c < p.nchunks;
      if (on && tok_ok) {
        if constexpr (A16) {
#pragma unroll
          for (int j = 0; j < NT; ++j) {  // token tile j: token g + 8 j
            const bool live = g + 8 * j < p.m;
            const uint4* xp = reinterpret_cast<const uint4*>(
                static_cast<const bf16*>(p.x) + static_cast<int64_t>(g + 8 * j) * p.ldx +
                c * kChunk + 16 * t);
            o.xv[u][2 * j] = live ? __ldg(xp) : make_uint4(0, 0, 0, 0);
            o.xv[u][2 * j + 1] = live ? __ldg(xp + 1) : make_uint4(0, 0, 0, 0);
          }
        } else if constexpr (kW4F) {
          const uint4* xp =
              reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) +
                                             static_cast<int64_t>(g) * p.ldx + c * kChunk + 16 * t);
          o.xv[u][0] = __ldg(xp);
          o.xv[u][1] = __ldg(xp + 1);
        } else if constexpr (FQ) {
          o.xv[u][0] = *reinterpret_cast<const uint4*>(xq + g * kpad + c * kChunk + 16 * t);
        } else {
#pragma unroll
          for (int j = 0; j < NT; ++j)  // token tile j: token g + 8 j
            o.xv[u][j] = g + 8 * j < p.m
                             ? __ldg(reinterpret_cast<const uint4*>(
                                   static_cast<const uint8_t*>(p.x) +
                                   static_cast<int64_t>(g + 8 * j) * p.ldx + c * kChunk + 16 * t))
                             : make_uint4(0, 0, 0, 0);
        }
      } else {
#pragma unroll
        for (int h = 0; h < XL; ++h) o.xv[u][h] = make_uint4(0, 0, 0, 0);
      }
      if constexpr (kW4F) {
        if (on) {
          const int64_t so = static_cast<int64_t>(group_of_chunk(p, c)) * p.n_pad + row_g;
          o.ws[u][0] = __ldg(p.wscale + so);
          o.ws[u][1] = __ldg(p.wscale + so + 8);
          o.wz[u][0] = __ldg(p.zeros + so);
          o.wz[u][1] = __ldg(p.zeros + so + 8);
        }
      }
    }
  };
  Operands cur, next;
  if (items > 0) load_operands(0, cur);
  Acc acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = Acc(0);
  for (int item = 0; item < items; ++item) {
    const int tl = item / spt, st = item % spt;
    const int tile = blockIdx.x + tl * gridDim.x;
    const int cw = st * G::kStageChunks + warp * WC;  // this warp's first chunk of the stage
    if (item + 1 < items) load_operands(item + 1, next);
    const auto& xv = cur.xv;
    const auto& ws = cur.ws;
    const auto& wz = cur.wz;
    const int s = ring_slot_filled<kStages>(full, item);
    const uint8_t* stage = smem + s * G::kStageBytes;
#pragma unroll
    for (int u = 0; u < WC; ++u) {
      if (cw + u >= p.nchunks) break;
      const int cl = warp * WC + u;  // chunk within the stage
      if constexpr (kW4F) {
        const uint4 wv = reinterpret_cast<const uint4*>(stage + cl * 512)[lane];
        const uint32_t z0 = w4_zero2(wz[u][0]), z1 = w4_zero2(wz[u][1]);
        float ct[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          uint32_t a[4];
          w4_frag(word(wv, h), z0, z1, a);
          mma_bf16(ct, a, word(xv[u][h >> 1], (h & 1) * 2), word(xv[u][h >> 1], (h & 1) * 2 + 1));
        }
        acc[0][0] = fmaf(ct[0], ws[u][0], acc[0][0]);
        acc[0][1] = fmaf(ct[1], ws[u][0], acc[0][1]);
        acc[0][2] = fmaf(ct[2], ws[u][1], acc[0][2]);
        acc[0][3] = fmaf(ct[3], ws[u][1], acc[0][3]);
      } else if constexpr (A16) {
        // The lane's 16 codes of rows g and g + 8 (k = 16t .. 16t + 15 of the chunk) and the
        // same 16 x values. Four m16n8k16 MMAs: the MMA's k pairs (2t, 2t + 1) and (2t + 8,
        // 2t + 9) stand for bytes (4j, 4j + 1) and (4j + 2, 4j + 3) of the lane's word j in
        // both operands, so the sum is unchanged (the same k order for A and B).
        const uint8_t* r0 = stage + g * G::kRowPitch + cl * kChunk + 16 * t;
        const uint4 w0 = *reinterpret_cast<const uint4*>(r0);
        const uint4 w1 = *reinterpret_cast<const uint4*>(r0 + 8 * G::kRowPitch);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t a = word(w0, j), b = word(w1, j);
          const uint32_t f[4] = {e4m3x2_to_f16x2(a), e4m3x2_to_f16x2(b), e4m3x2_to_f16x2(a >> 16),
                                 e4m3x2_to_f16x2(b >> 16)};
#pragma unroll
          for (int n = 0; n < NT; ++n)  // token tile n's x words
            mma_f16(acc[n], f, bf16x2_to_scaled_f16x2(word(xv[u][2 * n + (j >> 1)], (j & 1) * 2)),
                    bf16x2_to_scaled_f16x2(word(xv[u][2 * n + (j >> 1)], (j & 1) * 2 + 1)));
        }
      } else {
        const uint8_t* r0 = stage + g * G::kRowPitch + cl * kChunk + 16 * t;
        const uint4 w0 = *reinterpret_cast<const uint4*>(r0);
        const uint4 w1 = *reinterpret_cast<const uint4*>(r0 + 8 * G::kRowPitch);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t a[4] = {word(w0, 2 * h), word(w1, 2 * h), word(w0, 2 * h + 1),
                                 word(w1, 2 * h + 1)};
#pragma unroll
          for (int j = 0; j < NT; ++j)
            mma_8bit(acc[j], a, word(xv[u][j], 2 * h), word(xv[u][j], 2 * h + 1));
        }
      }
    }
    mbar_arrive(&empty[s]);  // every consumer thread (mbar_init_ring)
    if (st == spt - 1) {     // the tile is done: add the warps' partials in warp order
      // rb[j][warp][i][lane]: token tile j's slot i of this warp.
      Acc* rb = red + (tl & 1) * (NT * kWarps * 128);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) rb[((j * kWarps + warp) * 4 + i) * 32 + lane] = acc[j][i];
      consumers_sync(kWarps * 32);
      if constexpr (GATED) {
        // Slots 0 / 1 hold the gate rows' sums (tokens 2t, 2t + 1 of the token tile), slots
        // 2 / 3 the up rows'. 64 threads a token tile.
        if (threadIdx.x < 64 * NT) {
          const int j = threadIdx.x >> 6, i = (threadIdx.x >> 5) & 1, l = threadIdx.x & 31;
          const Acc* rj = rb + j * (kWarps * 128);
          Acc gs = Acc(0), us = Acc(0);
#pragma unroll
          for (int w = 0; w < kWarps; ++w) {
            gs += rj[(w * 4 + i) * 32 + l];
            us += rj[(w * 4 + i + 2) * 32 + l];
          }
          const int feature = tile * (kTileRows / 2) + (l >> 2);
          const int tok = 8 * j + 2 * (l & 3) + (i & 1);
          if (tok < p.m) {
            float xs;
            if constexpr (FQ)
              xs = xq_scale[tok];
            else if constexpr (A16)
              xs = kA16SumScale;
            else
              xs = __ldg(p.xscale + tok);
            // The scales as finish_output applies them; silu(g) = g / (1 + exp(-g)), the
            // form the CPU op and torch evaluate.
            const float gate = static_cast<float>(gs) * xs * __ldg(p.wscale + feature);
            const float up = static_cast<float>(us) * xs * __ldg(p.wscale + p.n + feature);
            static_cast<TOut*>(p.y)[static_cast<int64_t>(tok) * p.n + feature] =
                from_float<TOut>(gate / (1.0f + expf(-gate)) * up);
          }
        }
      } else if (threadIdx.x < 128 * NT) {  // 128 threads a token tile
        const int j = threadIdx.x >> 7, i = (threadIdx.x >> 5) & 3, l = threadIdx.x & 31;
        const Acc* rj = rb + j * (kWarps * 128);
        Acc sum = Acc(0);
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += rj[(w * 4 + i) * 32 + l];
        const int row = tile * kTileRows + (l >> 2) + (i >= 2 ? 8 : 0);
        const int tok = 8 * j + 2 * (l & 3) + (i & 1);
        if (row < p.n && tok < p.m) {
          if constexpr (FQ)
            finish_output<F, TOut>(p, tok, row, static_cast<float>(sum), xq_scale[tok]);
          else if constexpr (A16)
            finish_output<F, TOut>(p, tok, row, static_cast<float>(sum), kA16SumScale);
          else
            finish_output<F, TOut>(p, tok, row, static_cast<float>(sum));
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[j][i] = Acc(0);
    }
    cur = next;
  }
}

// KITE_CUDA_QBULK_PRE_WAIT=N: the 8-bit bulk GEMV's producer copies N ring stages before
// pdl_wait (default 1; 0: the whole ring, the form before run 31).
int qbulk_prewait_stages() {
  static const int stages =
      static_cast<int>(std::max(0LL, env_number("KITE_CUDA_QBULK_PRE_WAIT", 1)));
  return stages;
}

// One instantiation of the kernel: its shared-memory limit raised to max_smem on its first
// launch, then launched with smem bytes.
template <int F, typename TOut, bool FQ, bool GATED, bool A16, int NT>
void launch_instance(const KParams& p, dim3 grid, size_t smem, size_t max_smem,
                     cudaStream_t stream) {
  constexpr auto kernel = qgemv_bulk_kernel<F, TOut, FQ, GATED, A16, NT>;
  static const bool ready = [max_smem] {
    KITE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
    return true;
  }();
  (void)ready;
  launch_pdl(kernel, grid, kThreads, smem, stream, p);
  KITE_CUDA_CHECK_LAUNCH();
}

template <int F, typename TOut, bool GATED>
void launch_bulk(const KParams& args, cudaStream_t stream) {
  static_assert(F == kW4 || F == kFp8Ch || F == kI8Ch, "no bulk GEMV for FP8 block weights");
  // The 8-bit formats stream prewait_stages stages before pdl_wait; W4 (here only when forced:
  // the lean decode kernel takes it) keeps its whole ring, the form measured for it.
  KParams p = args;
  p.prewait_stages = F == kW4 ? 0 : qbulk_prewait_stages();
  constexpr size_t kSmem = Geometry<F>::kSmemBytes;
  const int tiles = GATED ? p.n / (kTileRows / 2) : p.n_pad / kTileRows;
  const int sms = device_properties().multiProcessorCount;
  const dim3 grid(static_cast<unsigned>(tiles < sms ? tiles : sms));
  if constexpr (F != kW4) {
    // 9 to 16 rows: two token tiles, on codes quantized by a kernel before or (FP8) BF16 x.
    if (p.m > 8) {
      KITE_CUDA_OP_CHECK(p.m <= kBulkMaxRows && !p.xq_src, "qgemv_bulk",
                         "9-16 rows are taken as codes quantized before or BF16 x (FP8)");
      constexpr size_t kSmem2 = Geometry<F, 2>::kSmemBytes;
      if constexpr (F == kFp8Ch) {
        if (p.xq_a16)
          return launch_instance<F, TOut, false, GATED, true, 2>(p, grid, kSmem2, kSmem2, stream);
      }
      return launch_instance<F, TOut, false, GATED, false, 2>(p, grid, kSmem2, kSmem2, stream);
    }
    if constexpr (F == kFp8Ch) {
      if (p.xq_a16)  // W8A16: x is BF16
        return launch_instance<F, TOut, false, GATED, true, 1>(p, grid, kSmem, kSmem, stream);
    }
    if (p.xq_src) {
      // In-block quantization: codes, 8 scales and 2 kWarps floats of scratch (the amax's
      // and the folded norm's sums) beside the ring.
      constexpr size_t kFusedExtra = 8 * 4 + 2 * kWarps * 4;
      const size_t smem = kSmem + static_cast<size_t>(p.m) * p.nchunks * kChunk + kFusedExtra;
      return launch_instance<F, TOut, true, GATED, false, 1>(
          p, grid, smem, kSmem + kFusedQuantMaxBytes + kFusedExtra, stream);
    }
  }
  launch_instance<F, TOut, false, GATED, false, 1>(p, grid, kSmem, kSmem, stream);
}

}  // namespace

template <int F, typename TOut>
void launch_qgemv_bulk(const KParams& p, cudaStream_t stream) {
  launch_bulk<F, TOut, false>(p, stream);
}

template <int F>
void launch_qgemv_bulk_silu(const KParams& p, cudaStream_t stream) {
  launch_bulk<F, bf16, true>(p, stream);
}

template void launch_qgemv_bulk_silu<kFp8Ch>(const KParams&, cudaStream_t);
template void launch_qgemv_bulk_silu<kI8Ch>(const KParams&, cudaStream_t);
template void launch_qgemv_bulk<kW4, float>(const KParams&, cudaStream_t);
template void launch_qgemv_bulk<kW4, bf16>(const KParams&, cudaStream_t);
template void launch_qgemv_bulk<kFp8Ch, float>(const KParams&, cudaStream_t);
template void launch_qgemv_bulk<kFp8Ch, bf16>(const KParams&, cudaStream_t);
template void launch_qgemv_bulk<kI8Ch, float>(const KParams&, cudaStream_t);
template void launch_qgemv_bulk<kI8Ch, bf16>(const KParams&, cudaStream_t);

}  // namespace kite::cuda::quant_detail
