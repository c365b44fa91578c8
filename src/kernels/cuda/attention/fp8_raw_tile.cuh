// FP8 E4M3 K/V tiles kept as raw codes in shared memory, and the mma fragments read straight
// from them (decode_mma.cu's FP8 instantiation). The codes are staged by cp.async like BF16
// rows (a ring of several tiles, nothing held in registers), and each lane turns the bytes it
// needs into fp16 fragments with one cvt per two codes — no fp16 copy of the tile is written.
//
// Fragments are built from whole words by permuting the order in which the MMAs see the dims,
// which a dot product and an output column do not care about as long as both sides agree:
//  - Q·K^T: for each pair P of 16-dim k-steps (32 dims), lane (g, t) reads 8 codes of key row
//    g, dims 32P + 8t .. + 7 (one 64-bit load). k-step 2P takes dims +0..+3 (k = 2t, 2t + 1 ->
//    +0, +1; k = 2t + 8, 2t + 9 -> +2, +3) and k-step 2P + 1 dims +4..+7; the query fragments
//    (q_frag_perm) use the same order.
//  - P·V: for each group G of four 8-column n-tiles (32 dims), lane (g, t) reads one word of
//    each of its four key rows 2t, 2t + 1, 2t + 8, 2t + 9 (dims 32G + 4g .. + 3); n-tile 4G + j
//    takes byte j, so its column n holds dim 32G + 4n + j (v_dim).
// Rows are stored with their 32-byte pairs XOR-swizzled so that those reads are free of bank
// conflicts for D a multiple of 128 (a 2-way conflict remains for V when D % 128 == 64).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/attention/mma_tile.cuh"

namespace kite::cuda::attention::mma {

// Two E4M3 codes (the low 16 bits of `bits`) -> fp16x2 (exact), the lower byte in the low half.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t bits) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(bits & 0xFFFFu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Byte offset of (row, 32-byte pair p) in a raw tile of D-byte rows. K rows are read by four
// consecutive rows per half-warp, V rows by rows 2t + c (t = 0..3) per warp.
template <int D, bool kIsV>
__device__ __forceinline__ uint32_t raw_pair(int row, int p) {
  static_assert(D % 64 == 0, "raw FP8 rows of whole 64-byte runs");
  int x;
  if constexpr (D % 128 == 0)
    x = kIsV ? (row >> 1) & 3 : row & 3;
  else
    x = (row >> 1) & 1;
  return static_cast<uint32_t>(row * D + (p ^ x) * 32);
}

// Starts the copy of keys [key0, key0 + ROWS)'s raw K (DK bytes) and V (the first DV bytes of
// each V row) into swizzled tiles; keys at or past valid_end are zero-filled. False when a
// block id it needed was outside the cache (that row is zero-filled).
template <int DK, int DV, int ROWS, int THREADS>
__device__ __forceinline__ bool load_raw_fp8_tiles(char* k_tile, char* v_tile, const PagedKv& kv,
                                                   int key0, int valid_end, int tid) {
  const int c0 = tid % 8;
  return for_each_kv_row<ROWS, THREADS>(
      kv, key0, valid_end, tid, [&](int, int row, bool valid, int64_t k_at, int64_t v_at) {
        const uint8_t* k_src = static_cast<const uint8_t*>(kv.k_cache) + k_at;
        const uint8_t* v_src = static_cast<const uint8_t*>(kv.v_cache) + v_at;
#pragma unroll
        for (int c = c0; c < DK / 16; c += 8)
          cp_async16(k_tile + raw_pair<DK, false>(row, c / 2) + (c & 1) * 16, k_src + c * 16,
                     valid);
#pragma unroll
        for (int c = c0; c < DV / 16; c += 8)
          cp_async16(v_tile + raw_pair<DV, true>(row, c / 2) + (c & 1) * 16, v_src + c * 16,
                     valid);
      });
}

// Q·K^T's B fragments for k-steps 2P and 2P + 1 of key row `row`: b[0..1] step 2P, b[2..3]
// step 2P + 1 (lane t's 8 codes, as the header describes).
template <int DK>
__device__ __forceinline__ void k_frags(uint32_t (&b)[4], const char* k_tile, int row, int p,
                                        int t) {
  const uint2 w = *reinterpret_cast<const uint2*>(k_tile + raw_pair<DK, false>(row, p) + 8 * t);
  b[0] = e4m3x2_to_f16x2(w.x);
  b[1] = e4m3x2_to_f16x2(w.x >> 16);
  b[2] = e4m3x2_to_f16x2(w.y);
  b[3] = e4m3x2_to_f16x2(w.y >> 16);
}

// P·V's B fragments for n-tiles 4G .. 4G + 3 of the 16 keys at key0: b[j][0..1] n-tile 4G + j.
template <int DV>
__device__ __forceinline__ void v_frags(uint32_t (&b)[4][2], const char* v_tile, int key0, int gp,
                                        int g, int t) {
  uint32_t w[4];  // rows 2t, 2t + 1, 2t + 8, 2t + 9
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = key0 + 2 * t + (i & 1) + (i >> 1) * 8;
    w[i] = *reinterpret_cast<const uint32_t*>(v_tile + raw_pair<DV, true>(row, gp) + 4 * g);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // h: keys 2t, 2t + 1 (b[.][0]) or 2t + 8, 2t + 9 (b[.][1])
    const uint32_t lo = prmt(w[2 * h], w[2 * h + 1], 0x5140u);  // bytes 0, 1 of both rows
    const uint32_t hi = prmt(w[2 * h], w[2 * h + 1], 0x7362u);  // bytes 2, 3
    b[0][h] = e4m3x2_to_f16x2(lo);
    b[1][h] = e4m3x2_to_f16x2(lo >> 16);
    b[2][h] = e4m3x2_to_f16x2(hi);
    b[3][h] = e4m3x2_to_f16x2(hi >> 16);
  }
}

// The dim that column n of n-tile dt holds under the P·V order above.
__device__ __forceinline__ int v_dim(int dt, int n) { return 32 * (dt >> 2) + 4 * n + (dt & 3); }

// Query A fragments (BF16 in a swz<DQK> tile, 16 rows) in the Q·K^T order above, converted to
// fp16 times `scale`: qf[2P + h] for each pair P.
template <int DQK>
__device__ __forceinline__ void q_frags_perm(uint32_t (&qf)[DQK / 16][4], const char* sq, int g,
                                             int t, float scale) {
  auto conv = [&](uint32_t w) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w));
    return pack_f16(f.x * scale, f.y * scale);
  };
#pragma unroll
  for (int p = 0; p < DQK / 32; ++p) {
    const uint4 lo = *reinterpret_cast<const uint4*>(sq + swz<DQK>(g, 4 * p + t));
    const uint4 hi = *reinterpret_cast<const uint4*>(sq + swz<DQK>(g + 8, 4 * p + t));
    qf[2 * p][0] = conv(lo.x);
    qf[2 * p][1] = conv(hi.x);
    qf[2 * p][2] = conv(lo.y);
    qf[2 * p][3] = conv(hi.y);
    qf[2 * p + 1][0] = conv(lo.z);
    qf[2 * p + 1][1] = conv(hi.z);
    qf[2 * p + 1][2] = conv(lo.w);
    qf[2 * p + 1][3] = conv(hi.w);
  }
}

}  // namespace kite::cuda::attention::mma
