// The quantized decode kernel (M <= 8, one token tile; quant_kernel.cuh declares its launches):
// per-tile register rings streaming each warp's run of the weight, tensor-core MMAs on it; W4's
// lean form for group 128 (qdec_w4_lean_kernel, what real shapes take); and the W4 gated form
// that writes silu(gate) * up. Internal to src/kernels/cuda/quant.
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/env_switch.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/quant/quant_geometry.h"
#include "kernels/cuda/quant/quant_kernel.cuh"
#include "kernels/cuda/stream.h"

namespace kite::cuda::quant_detail {
namespace {

// Decode kernel (M <= 8, one token tile): the weight streamed GEMV-style. A block is one 16-row
// weight tile and KW warps (KW chosen at launch so that one wave of the grid fills every SM at
// <= 64 registers per thread); warp wk takes a contiguous range of `cpw` 64-channel chunks, so
// each warp streams one contiguous run of the tile's codes (W4: 512 bytes per chunk, one 16-byte
// `ld.global.cs` per lane; W8: two 16-byte loads per lane, rows g and g + 8). The codes (and the
// W4 group scales/zeros) of U chunks are in flight per warp in a ring: a slot is refilled with
// chunk c + U right after chunk c is consumed, so the memory pipe never drains inside the loop.
// Activations are not held across that latency: the next chunk's x is loaded (through L1) while
// the current one is computed. The same tensor-core MMAs and fragment orders as qmma_kernel
// (identical numerics, same device layouts); the KW partial sums are added in warp order
// through shared memory (deterministic). Launched with programmatic dependent launch: the first
// U chunks are requested before waiting for the kernel that wrote x.

// One lane's weight stream, addressed once before the loop so that each chunk's loads cost a
// 32-bit index each (64-bit products per chunk were a good part of the loop's instructions).
struct DecStream {
  const uint8_t* w;  // W4: the tile's codes + 16 * lane; 8-bit: row g's codes + 16 * t
  const float* s;    // W4: group scales of row g (group stride n_pad)
  const uint8_t* z;  // W4: group zeros of row g
};

template <int F, int WL>
__device__ __forceinline__ void dec_load_w(const DecStream& st, int kpad, int c, uint4 (&wv)[WL]) {
  if constexpr (F == kW4) {
    wv[0] = __ldcs(reinterpret_cast<const uint4*>(st.w + c * 512));
  } else {
    wv[0] = __ldcs(reinterpret_cast<const uint4*>(st.w + c * 64));
    wv[1] = __ldcs(reinterpret_cast<const uint4*>(st.w + c * 64 + 8 * kpad));
  }
}

// W4: the group scales and zeros of rows g and g + 8 for chunk c.
__device__ __forceinline__ void dec_load_sz(const KParams& p, const DecStream& st, int c,
                                            float (&ws)[2], uint32_t (&wz)[2]) {
  const int so = group_of_chunk(p, c) * p.n_pad;
  ws[0] = __ldg(st.s + so);
  ws[1] = __ldg(st.s + so + 8);
  wz[0] = __ldg(st.z + so);
  wz[1] = __ldg(st.z + so + 8);
}

// xoff: this lane's token row of x + 16 channels * t, in elements (a 32-bit offset from the
// parameter's base: a per-lane 64-bit pointer was rematerialized in every chunk).
template <int F, int XL>
__device__ __forceinline__ void dec_load_x(const KParams& p, int xoff, int c, uint4 (&xv)[XL]) {
  constexpr int kElems = 64;  // a 64-channel chunk of x: BF16 (W4) or 8-bit codes
  const uint4* xp =
      F == kW4
          ? reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) + xoff + c * kElems)
          : reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.x) + xoff + c * kElems);
#pragma unroll
  for (int h = 0; h < XL; ++h) xv[h] = __ldg(xp + h);
}

// One W4 chunk (64 channels of the lane's rows g, g + 8) into acc, for TT token tiles of 8
// (x[j]: tile j's x): the codes word by word as exact BF16 (q - zero) fragments, dequantized
// once and multiplied into every tile (one MMA each), then the pair of group scales. Each tile
// gets the MMAs and scaling a one-tile call gives it: TT tiles equal TT one-tile runs bit for bit.
template <int TT>
__device__ __forceinline__ void w4_chunk(const uint4& codes, const uint4 (&x)[TT][2],
                                         const float (&ws)[2], const uint32_t (&wz)[2],
                                         float (&acc)[TT][4]) {
  const uint32_t z0 = w4_zero2(wz[0]), z1 = w4_zero2(wz[1]);
  float ct[TT][4];
#pragma unroll
  for (int j = 0; j < TT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) ct[j][i] = 0.0f;
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    uint32_t a[4];
    w4_frag(word(codes, s), z0, z1, a);
#pragma unroll
    for (int j = 0; j < TT; ++j)
      mma_bf16(ct[j], a, word(x[j][s >> 1], (s & 1) * 2), word(x[j][s >> 1], (s & 1) * 2 + 1));
  }
#pragma unroll
  for (int j = 0; j < TT; ++j) {
    acc[j][0] = fmaf(ct[j][0], ws[0], acc[j][0]);
    acc[j][1] = fmaf(ct[j][1], ws[0], acc[j][1]);
    acc[j][2] = fmaf(ct[j][2], ws[1], acc[j][2]);
    acc[j][3] = fmaf(ct[j][3], ws[1], acc[j][3]);
  }
}

// The block's end: the KW warps' partial sums added in warp order (deterministic), thread j
// finishing accumulator slot j (token tile j / 128, fragment register j / 32 % 4 of lane
// j % 32); the gated form adds the gate half's and the up half's warps apart and writes
// silu(gate) * up. red holds kw * TT * 128 values; the block's output tile is `otile`, its
// first token tok0.
template <int F, typename TOut, bool kGated, int TT, typename Acc>
__device__ __forceinline__ void dec_finish(const KParams& p, const Acc (&acc)[TT][4], Acc* red,
                                           int kwt, int otile, int tok0) {
  constexpr int kSlots = TT * 128;
  const int kw = blockDim.x >> 5, wk = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < TT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[wk * kSlots + (j * 4 + i) * 32 + lane] = acc[j][i];
  __syncthreads();
  for (int j = threadIdx.x; j < kSlots; j += blockDim.x) {
    const int i = (j >> 5) & 3, l = j & 31;
    Acc sum = Acc(0);
    for (int w = 0; w < kwt; ++w) sum += red[w * kSlots + j];
    const int row = otile * 16 + (l >> 2) + (i >= 2 ? 8 : 0);
    const int tok = tok0 + (j >> 7) * 8 + 2 * (l & 3) + (i & 1);
    if (row >= p.n || tok >= p.m) continue;
    if constexpr (kGated) {
      Acc up = Acc(0);
      for (int w = kwt; w < kw; ++w) up += red[w * kSlots + j];
      // silu(g) = g / (1 + exp(-g)), the form the CPU op and torch evaluate.
      const float gate = static_cast<float>(sum);
      static_cast<TOut*>(p.y)[static_cast<int64_t>(tok) * p.n + row] =
          from_float<TOut>(gate / (1.0f + expf(-gate)) * static_cast<float>(up));
    } else {
      finish_output<F, TOut>(p, tok, row, static_cast<float>(sum));
    }
  }
}

// kPair (W4 with an even number of chunks per group, cpw even): the two chunks of a pair share
// one group, so their scales and zeros are loaded once (half the scale loads and registers).
// kGated (W4, a gated MLP's stacked [gate; up] weight, p.n = the features I, I % 16 == 0): the
// block's first half of warps streams gate tile blockIdx.x, the second half up tile
// blockIdx.x + I / 16, and the block writes silu(gate) * up [m, I] (no silu_mul launch).
template <int F, int U, typename TOut, bool kPair = false, bool kGated = false>
__global__ void __launch_bounds__(512, 2) qdec_kernel(const KParams p, int cpw) {
  using Acc = std::conditional_t<F == kI8Ch, int, float>;
  constexpr bool kW4F = F == kW4;
  static_assert(!kGated || kW4F, "the gated form is W4's");
  constexpr int WL = kW4F ? 1 : 2;  // 16-byte code loads per lane per chunk
  constexpr int XL = kW4F ? 2 : 1;  // 16-byte activation loads per lane per chunk
  const int kw = blockDim.x >> 5;
  const int wk = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int kwt = kGated ? kw >> 1 : kw;          // warps per tile
  const bool up_half = kGated && wk >= kwt;       // this warp streams the up tile
  const int wt = up_half ? wk - kwt : wk;         // the warp's index among its tile's
  const int tile = blockIdx.x + (up_half ? p.n / 16 : 0);
  const int row_g = tile * 16 + g;
  const int kpad = p.nchunks * static_cast<int>(kChunk);
  const int cb = wt * cpw;
  const int ce = min(p.nchunks, cb + cpw);
  const bool tok_ok = g < p.m;  // this lane's B-fragment token

  DecStream st;
  if constexpr (kW4F) {
    st.w = p.codes + static_cast<int64_t>(tile) * p.nchunks * 512 + 16 * lane;
    st.s = p.wscale + row_g;
    st.z = p.zeros + row_g;
  } else {
    st.w = p.codes + static_cast<int64_t>(row_g) * kpad + 16 * t;
  }
  const int xoff = g * p.ldx + 16 * t;  // read only where tok_ok

  static_assert(U % 2 == 0, "x double buffer and chunk pairs take U even");
  constexpr int kSS = kPair ? 2 : 1;  // chunks per scale slot
  uint4 wv[U][WL];
  float ws[U][2];
  uint32_t wz[U][2];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (cb + u < ce) {
      dec_load_w<F, WL>(st, kpad, cb + u, wv[u]);
      if constexpr (kW4F)
        if (u % kSS == 0) dec_load_sz(p, st, cb + u, ws[u], wz[u]);
    }
  pdl_wait();  // x (and its scales) come from the previous kernel
  pdl_trigger();

  Acc acc[1][4] = {{Acc(0), Acc(0), Acc(0), Acc(0)}};
  // x of chunks c and c + 1 in two buffers, chunk c in xb[(c - cb) & 1] (U is even, so that
  // is xb[u & 1]): no register copies between chunks. A lane past the last token never loads,
  // so its buffers stay zero.
  uint4 xb[2][1][XL];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int h = 0; h < XL; ++h) xb[i][0][h] = make_uint4(0, 0, 0, 0);
  if (tok_ok && cb < ce) dec_load_x<F, XL>(p, xoff, cb, xb[0][0]);
  for (int c0 = cb; c0 < ce; c0 += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u;
      if (c < ce) {
        const uint4(&xc)[XL] = xb[u & 1][0];
        if (tok_ok && c + 1 < ce) dec_load_x<F, XL>(p, xoff, c + 1, xb[(u + 1) & 1][0]);
        const int su = u - u % kSS;  // this chunk's scale slot (a constant once unrolled)
        if constexpr (kW4F) {
          w4_chunk<1>(wv[u][0], xb[u & 1], ws[su], wz[su], acc);
        } else if constexpr (F == kFp8Blk) {
          const int kb = group_of_chunk(p, c);
          float sw0, sw1;
          fp8_block_row_scales(p, row_g, kb, sw0, sw1);
          const int ta = 2 * t;
          const float sx0 =
              ta < p.m ? __ldg(p.xscale + static_cast<int64_t>(ta) * p.scale_cols + kb) : 0.0f;
          const float sx1 = ta + 1 < p.m
                                ? __ldg(p.xscale + static_cast<int64_t>(ta + 1) * p.scale_cols + kb)
                                : 0.0f;
          float ct[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            const uint32_t a[4] = {word(wv[u][0], 2 * s), word(wv[u][1], 2 * s),
                                   word(wv[u][0], 2 * s + 1), word(wv[u][1], 2 * s + 1)};
            mma_8bit(ct, a, word(xc[0], 2 * s), word(xc[0], 2 * s + 1));
          }
          acc[0][0] = fmaf(ct[0], sw0 * sx0, acc[0][0]);
          acc[0][1] = fmaf(ct[1], sw0 * sx1, acc[0][1]);
          acc[0][2] = fmaf(ct[2], sw1 * sx0, acc[0][2]);
          acc[0][3] = fmaf(ct[3], sw1 * sx1, acc[0][3]);
        } else {
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            const uint32_t a[4] = {word(wv[u][0], 2 * s), word(wv[u][1], 2 * s),
                                   word(wv[u][0], 2 * s + 1), word(wv[u][1], 2 * s + 1)};
            mma_8bit(acc[0], a, word(xc[0], 2 * s), word(xc[0], 2 * s + 1));
          }
        }
        if (c + U < ce) dec_load_w<F, WL>(st, kpad, c + U, wv[u]);
        if constexpr (kW4F)  // the slot's last chunk is done: the next pair's scales
          if (u % kSS == kSS - 1 && c + U - (kSS - 1) < ce)
            dec_load_sz(p, st, c + U - (kSS - 1), ws[su], wz[su]);
      }
    }
  }

  extern __shared__ __align__(16) unsigned char dec_smem[];
  dec_finish<F, TOut, kGated, 1>(p, acc, reinterpret_cast<Acc*>(dec_smem), kwt, blockIdx.x, 0);
}

// The W4 decode kernel's lean form, for group 128 (a chunk pair is one group) and an even
// number of chunks (each warp then owns whole pairs): the warp keeps its code, x, scale and zero
// pointers and advances them once a pair, and the loop has one bound (the pair count) instead
// of per-chunk checks. Why: in qdec_kernel's SASS a chunk took ~93 instructions of which 52 are
// the work; the rest rebuilt addresses every chunk under the 64-register cap and tested bounds
// (BENCHMARKS.md run 19). The same chunks in the same order through the same w4_chunk, so it
// equals qdec_kernel bit for bit: the next pair's codes are requested as each chunk's MMAs
// finish with its registers, x of the next chunk as the current one's MMAs run, the next
// pair's scales after the pair.
// Past decode sizes: TT token tiles of 8 a block, each chunk dequantized once and multiplied
// into every tile (TT > 1 holds TT tiles of x in registers: 128 registers a thread, one
// 512-thread block per SM; TT = 4 spilled, so at most 3), and `groups` blocks a weight tile taking
// consecutive groups of 8 TT tokens (block b: tile b / groups, group b % groups). A tile's blocks
// run side by side, so its codes come from HBM once and from L2 for the others: the weight streams
// at the decode kernel's pace (the GEMM kernels stage it through shared memory per token block).
template <typename TOut, bool kGated, int TT>
__global__ void __launch_bounds__(512, TT == 1 ? 2 : 1)
    qdec_w4_lean_kernel(const KParams p, int cpw, int groups) {
  const int kw = blockDim.x >> 5;
  const int wk = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int kwt = kGated ? kw >> 1 : kw;
  const bool up_half = kGated && wk >= kwt;
  const int wt = up_half ? wk - kwt : wk;
  const int otile = blockIdx.x / groups, tok0 = (blockIdx.x % groups) * TT * 8;
  const int tile = otile + (up_half ? p.n / 16 : 0);
  const int row_g = tile * 16 + g;
  const int cb = wt * cpw;  // even
  const int pairs = max(0, min(p.nchunks, cb + cpw) - cb) >> 1;
  bool tok_ok[TT];  // this lane's token g + 8j is a row of x
#pragma unroll
  for (int j = 0; j < TT; ++j) tok_ok[j] = tok0 + g + 8 * j < p.m;

  // A chunk is 32 uint4 of codes (16 bytes a lane) and 8 uint4 of a token's x (64 BF16); token
  // tile j's x is 8 rows (ldx uint4) on.
  const uint4* w = reinterpret_cast<const uint4*>(
                       p.codes + (static_cast<int64_t>(tile) * p.nchunks + cb) * 512) + lane;
  const float* s = p.wscale + static_cast<int64_t>(cb >> 1) * p.n_pad + row_g;
  const uint8_t* z = p.zeros + static_cast<int64_t>(cb >> 1) * p.n_pad + row_g;
  const uint4* x = reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) +
                                                  static_cast<int64_t>(tok0 + g) * p.ldx + 16 * t) +
                   cb * 8;
  const int xtile = p.ldx;  // uint4 between token tiles: 8 rows of ldx BF16
  uint4 w0 = make_uint4(0, 0, 0, 0), w1 = w0;
  float ws[2] = {0.0f, 0.0f};
  uint32_t wz[2] = {0, 0};
  if (pairs > 0) {
    w0 = __ldcs(w);
    w1 = __ldcs(w + 32);
    ws[0] = __ldg(s);
    ws[1] = __ldg(s + 8);
    wz[0] = __ldg(z);
    wz[1] = __ldg(z + 8);
  }
  pdl_wait();  // x comes from the previous kernel
  pdl_trigger();

  float acc[TT][4];
  uint4 x0[TT][2], x1[TT][2];
#pragma unroll
  for (int j = 0; j < TT; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    x0[j][0] = x0[j][1] = x1[j][0] = x1[j][1] = make_uint4(0, 0, 0, 0);
    if (tok_ok[j] && pairs > 0) {
      x0[j][0] = __ldg(x + j * xtile);
      x0[j][1] = __ldg(x + j * xtile + 1);
    }
  }
  // One chunk pair; kMore: a pair follows, whose loads it issues. The last pair is peeled off
  // (kMore false) so that the loop's loads carry no condition: 2.7-3 % faster at batch 1 than
  // the loop testing `more` in front of each load (BENCHMARKS.md runs 42, 43).
  auto pair_step = [&](auto more_c) {
    constexpr bool kMore = decltype(more_c)::value;
#pragma unroll
    for (int j = 0; j < TT; ++j)
      if (tok_ok[j]) {
        x1[j][0] = __ldg(x + j * xtile + 8);
        x1[j][1] = __ldg(x + j * xtile + 9);
      }
    w4_chunk<TT>(w0, x0, ws, wz, acc);
    if constexpr (kMore) {
      w0 = __ldcs(w + 64);
#pragma unroll
      for (int j = 0; j < TT; ++j)
        if (tok_ok[j]) {
          x0[j][0] = __ldg(x + j * xtile + 16);
          x0[j][1] = __ldg(x + j * xtile + 17);
        }
    }
    w4_chunk<TT>(w1, x1, ws, wz, acc);
    if constexpr (kMore) {
      w1 = __ldcs(w + 96);
      s += p.n_pad;
      z += p.n_pad;
      ws[0] = __ldg(s);
      ws[1] = __ldg(s + 8);
      wz[0] = __ldg(z);
      wz[1] = __ldg(z + 8);
      w += 64;
      x += 16;
    }
  };
  for (int i = 0; i + 1 < pairs; ++i) pair_step(std::true_type{});
  if (pairs > 0) pair_step(std::false_type{});
  extern __shared__ __align__(16) unsigned char dec_smem[];
  dec_finish<kW4, TOut, kGated, TT>(p, acc, reinterpret_cast<float*>(dec_smem), kwt, otile, tok0);
}

constexpr int kDecMaxWarps = 16;

// Warps per tile: the most (at most 16, at least U chunks each) that keep the whole grid in one
// wave at `regs` registers per thread (64: floor(32 / KW) blocks per SM), but never fewer than
// `least` that get U chunks each. W4 asks for 4: with so many tiles that one wave leaves fewer
// (Llama-3-8B's stacked gate_up: 1,792 tiles, 2 warps), 4 warps a tile in 1.7 waves keep every
// SM full — 24.2 us against 27.7 at M = 1 (BENCHMARKS.md run 15, a sweep of warps and rings).
int decode_warps(const KParams& p, int u, int least, int regs = 64, int groups = 1) {
  const int sms = device_properties().multiProcessorCount;
  const int blocks = p.n_pad / 16 * groups;
  const int warps_per_sm = 65536 / 32 / regs;
  int kw = kDecMaxWarps;
  while (kw > 1 &&
         (static_cast<int64_t>(blocks) > static_cast<int64_t>(sms) * (warps_per_sm / kw) ||
          p.nchunks < kw * u))
    --kw;
  return kw < least && p.nchunks >= least * u ? least : kw;
}

// The lean W4 kernel's shape for p.m rows: token tiles of 8 a block (TT, at most 3: TT = 4
// spills), blocks a weight tile (groups); and its registers a thread (launch bounds).
struct LeanShape {
  int tt, groups;
};
LeanShape lean_shape(const KParams& p) {
  const int tiles8 = static_cast<int>(ceil_div(p.m, 8));
  const int groups = static_cast<int>(ceil_div(tiles8, 3));
  return {static_cast<int>(ceil_div(tiles8, groups)), groups};
}
int lean_regs(const LeanShape& s) { return s.tt == 1 ? 64 : 128; }

// The lean W4 kernel in `shape`, kw warps a block (its reduction: kw * TT * 128 floats of
// shared memory).
template <typename TOut, bool kGated>
void launch_lean(const KParams& p, const LeanShape& shape, int kw, int cpw, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((kGated ? p.n : p.n_pad) / 16 * shape.groups));
  const size_t smem = static_cast<size_t>(kw) * shape.tt * 128 * 4;
  const int gr = shape.groups;
  switch (shape.tt) {
    case 1:
      return launch_pdl(qdec_w4_lean_kernel<TOut, kGated, 1>, grid, kw * 32, smem, stream, p, cpw,
                        gr);
    case 2:
      return launch_pdl(qdec_w4_lean_kernel<TOut, kGated, 2>, grid, kw * 32, smem, stream, p, cpw,
                        gr);
    default:
      return launch_pdl(qdec_w4_lean_kernel<TOut, kGated, 3>, grid, kw * 32, smem, stream, p, cpw,
                        gr);
  }
}

bool takes_lean(const KParams& p, int cpw) {
  return w4_lean_applies(p.chunks_per_group, p.nchunks) && cpw % 2 == 0;
}

}  // namespace

// KITE_CUDA_W4_LEAN=0 keeps W4 at group 128 on qdec_kernel (an A/B switch; M <= 8 only then).
bool w4_lean_applies(int chunks_per_group, int64_t nchunks) {
  static const bool on = !env_switched_off("KITE_CUDA_W4_LEAN");
  return on && chunks_per_group == 2 && nchunks % 2 == 0;
}

template <int F, typename TOut>
void launch_qdec(const KParams& p, const DecodeOverride& o, cudaStream_t stream) {
  // FP8 block at U = 4 spills (its per-chunk scale loads); the others fit 64 registers. W4
  // runs 2-chunk rings too: 2-5 % faster than 4 at M = 1 on Llama-3-8B's q/k/v, o and down
  // (BENCHMARKS.md run 15).
  if (p.m > 8 && !(F == kW4 && w4_lean_applies(p.chunks_per_group, p.nchunks)))
    throw std::invalid_argument("quantized decode kernel: more than 8 rows off the lean W4 form");
  const int u = o.u == 2 || o.u == 4 ? o.u : (F == kFp8Blk || F == kW4 ? 2 : 4);
  const LeanShape shape = lean_shape(p);
  const int kw = o.kw > 0   ? std::min(o.kw, kDecMaxWarps)
                 : F == kW4 ? decode_warps(p, u, 4, lean_regs(shape), shape.groups)
                            : decode_warps(p, u, 1);
  // W4 with an even number of chunks per group (group 128: 2) pairs its chunks: every warp's
  // run starts on an even chunk (cpw even), so chunks 2i and 2i + 1 are in one group.
  const bool pair = F == kW4 && p.chunks_per_group % 2 == 0;
  int cpw = static_cast<int>(ceil_div(p.nchunks, kw));
  if (pair) cpw += cpw & 1;
  const dim3 grid(static_cast<unsigned>(p.n_pad / 16));
  const size_t smem = static_cast<size_t>(kw) * 128 * 4;
  auto launch = [&](auto paired) {  // paired: std::bool_constant (only W4 instantiates true)
    constexpr bool kPair = decltype(paired)::value;
    if (u == 2)
      launch_pdl(qdec_kernel<F, 2, TOut, kPair>, grid, kw * 32, smem, stream, p, cpw);
    else
      launch_pdl(qdec_kernel<F, 4, TOut, kPair>, grid, kw * 32, smem, stream, p, cpw);
  };
  if constexpr (F == kW4) {
    if (takes_lean(p, cpw)) {
      launch_lean<TOut, false>(p, shape, kw, cpw, stream);
    } else if (pair) {
      launch(std::true_type{});
    } else {
      launch(std::false_type{});
    }
  } else {
    launch(std::false_type{});
  }
  KITE_CUDA_CHECK_LAUNCH();
}

void launch_qdec_w4_silu(const KParams& p, const DecodeOverride& o, cudaStream_t stream) {
  // Each of the I / 16 blocks streams two tiles with the warps per tile the plain launch gives
  // the stacked weight (decode_warps over its 2I / 16 tiles): the same streams, half the
  // blocks. 2-chunk rings only (o.u is not taken: the 4-chunk form spills here).
  if (p.m > 8 && !w4_lean_applies(p.chunks_per_group, p.nchunks))
    throw std::invalid_argument(
        "quantized gated decode kernel: more than 8 rows off the lean form");
  KParams stacked = p;
  stacked.n_pad = 2 * p.n;
  const LeanShape shape = lean_shape(p);
  const int kwt =
      std::min(o.kw > 0 ? o.kw : decode_warps(stacked, 2, 4, lean_regs(shape), shape.groups),
               kDecMaxWarps / 2);
  const bool pair = p.chunks_per_group % 2 == 0;
  int cpw = static_cast<int>(ceil_div(p.nchunks, kwt));
  if (pair) cpw += cpw & 1;
  const dim3 grid(static_cast<unsigned>(p.n / 16));
  const int threads = 2 * kwt * 32;
  const size_t smem = static_cast<size_t>(2 * kwt) * 128 * 4;
  if (takes_lean(p, cpw))
    launch_lean<bf16, true>(p, shape, 2 * kwt, cpw, stream);
  else if (pair)
    launch_pdl(qdec_kernel<kW4, 2, bf16, true, true>, grid, threads, smem, stream, p, cpw);
  else
    launch_pdl(qdec_kernel<kW4, 2, bf16, false, true>, grid, threads, smem, stream, p, cpw);
  KITE_CUDA_CHECK_LAUNCH();
}

#define KITE_QDEC_INSTANTIATE(F)                                                          \
  template void launch_qdec<F, bf16>(const KParams&, const DecodeOverride&, cudaStream_t); \
  template void launch_qdec<F, float>(const KParams&, const DecodeOverride&, cudaStream_t);
KITE_QDEC_INSTANTIATE(kW4)
KITE_QDEC_INSTANTIATE(kFp8Ch)
KITE_QDEC_INSTANTIATE(kI8Ch)
KITE_QDEC_INSTANTIATE(kFp8Blk)
#undef KITE_QDEC_INSTANTIATE

}  // namespace kite::cuda::quant_detail
