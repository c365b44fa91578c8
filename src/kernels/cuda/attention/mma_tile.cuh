// Tensor-core building blocks for the BF16 attention kernels (prefill_mma.cu, decode_mma.cu):
// ldmatrix, the swizzled tile layout, fragment packing and the paged K/V tile loader, around the
// MMAs of mma_sync.cuh and the copies of cp_async.cuh.
//
// Shared-memory tiles hold ROWS rows of D bf16 values, row-major, with the 16-byte chunks of
// row r stored at chunk c ^ (r % 8) (XOR swizzle): the eight rows an ldmatrix reads at one
// logical chunk then land in eight different bank groups. D must be a multiple of 64 (so a row
// has a multiple of eight chunks and the row stride is a multiple of 128 bytes).
//
// With mma_sync.cuh's fragment layouts, the C fragments of two neighbouring n-tiles are the A
// fragment of one k-step (how P goes from the scores to the P·V product without shared memory).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/mma_sync.cuh"

namespace kite::cuda::attention::mma {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The two bf16 values of a register (lo: the lower address, the first column).
__device__ __forceinline__ float2 unpack_bf16(uint32_t v) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Byte offset of (row, 16-byte chunk) in a swizzled tile of D-wide bf16 rows.
template <int D>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  static_assert(D % 64 == 0, "swizzled tiles need D a multiple of 64");
  return static_cast<uint32_t>(row * (D * 2) + ((chunk ^ (row & 7)) * 16));
}

// Address this lane gives ldmatrix to read the 16x16 A block at (row0, col0) of a tile
// (matrices: rows 0-7 / 8-15 at cols 0-7, then the same at cols 8-15).
template <int D>
__device__ __forceinline__ uint32_t a_addr(uint32_t base, int row0, int col0, int lane) {
  return base + swz<D>(row0 + (lane & 7) + ((lane >> 3) & 1) * 8, (col0 >> 3) + (lane >> 4));
}

// B operand from K rows ([key][d], non-transposed): one n-tile of 8 keys at key0 and two
// k-steps at d0 and d0 + 16: r[0..1] = k-step d0, r[2..3] = k-step d0 + 16.
template <int D>
__device__ __forceinline__ uint32_t kb_addr(uint32_t base, int key0, int d0, int lane) {
  return base + swz<D>(key0 + (lane & 7), (d0 >> 3) + (lane >> 3));
}

// B operand from V rows ([key][d], transposed read): one k-step of 16 keys at key0 and two
// n-tiles at d0 and d0 + 8: r[0..1] = n-tile d0, r[2..3] = n-tile d0 + 8.
template <int D>
__device__ __forceinline__ uint32_t vb_addr(uint32_t base, int key0, int d0, int lane) {
  return base + swz<D>(key0 + (lane & 7) + ((lane >> 3) & 1) * 8, (d0 >> 3) + (lane >> 4));
}

// Where one tile's K and V rows come from: a sequence's block table and one kv head.
// The caches hold BF16, or FP8 E4M3 (fp8 = true) read as code * k_scale / v_scale.
struct PagedKv {
  const void* k_cache;
  const void* v_cache;
  const int32_t* block_table;  // this sequence's row
  int block_size, num_blocks;
  int64_t k_slot_stride, v_slot_stride;  // elements between slots
  int64_t k_head_offset, v_head_offset;  // elements from a slot's start to the kv head
  bool fp8 = false;
  float k_scale = 1.0f, v_scale = 1.0f;
  // FP8 only: the last k_tail values of a K row are BF16 (two bytes each, unscaled) after its
  // first DK - k_tail FP8 codes (MLA's rope key; ops::write_cache's bf16_tail). Only the MLA
  // kernel's loader reads such rows (decode_mla.cu); V is a prefix of the coded part.
  int k_tail = 0;
};

// 8 FP8 E4M3 codes (raw, 8 bytes) -> 8 BF16 values code * scale, stored as one 16-byte chunk at
// dst (shared memory): what cp_async16 would have copied from a BF16 cache.
__device__ __forceinline__ void fp8x8_to_bf16(char* dst, uint2 raw, float scale) {
  const uint8_t* b = reinterpret_cast<const uint8_t*>(&raw);
  uint4 out;
  uint32_t* o = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_fp8_e4m3 lo, hi;
    lo.__x = b[2 * i];
    hi.__x = b[2 * i + 1];
    const __nv_bfloat162 v = __floats2bfloat162_rn(static_cast<float>(lo) * scale,
                                                   static_cast<float>(hi) * scale);
    o[i] = *reinterpret_cast<const uint32_t*>(&v);
  }
  *reinterpret_cast<uint4*>(dst) = out;
}

// Where key `key`'s K and V rows start in the caches (elements, or bytes for FP8). False for a
// key at or past valid_end, and for one whose block id is outside the cache (then ok = false).
__device__ __forceinline__ bool kv_row_at(const PagedKv& kv, int key, int valid_end,
                                          int64_t& k_at, int64_t& v_at, bool& ok) {
  k_at = v_at = 0;
  if (key >= valid_end) return false;
  // Block sizes are powers of two in practice: a shift and a mask instead of an integer
  // division (~20 instructions, for every row of every tile).
  const unsigned k = static_cast<unsigned>(key), bs = static_cast<unsigned>(kv.block_size);
  unsigned bi, off;
  if ((bs & (bs - 1)) == 0) {
    bi = k >> (__ffs(static_cast<int>(bs)) - 1);
    off = k & (bs - 1);
  } else {
    bi = k / bs;
    off = k - bi * bs;
  }
  const int32_t block = kv.block_table[bi];
  if (block < 0 || block >= kv.num_blocks) {
    ok = false;
    return false;
  }
  const int64_t slot = static_cast<int64_t>(block) * kv.block_size + off;
  k_at = slot * kv.k_slot_stride + kv.k_head_offset;
  v_at = slot * kv.v_slot_stride + kv.v_head_offset;
  return true;
}

// The rows of keys [key0, key0 + ROWS) a thread handles when eight threads share a row: rows
// tid / 8 + i * THREADS / 8, each looked up once (kv_row_at) and handed to f(i, row, valid,
// k_at, v_at) (i a constant once unrolled). Returns false when a block id it needed was outside
// the cache.
template <int ROWS, int THREADS, typename F>
__device__ __forceinline__ bool for_each_kv_row(const PagedKv& kv, int key0, int valid_end,
                                                int tid, F&& f) {
  static_assert(THREADS % 8 == 0 && ROWS % (THREADS / 8) == 0, "rows must split over threads");
  constexpr int kRowsPerPass = THREADS / 8;
  bool ok = true;
#pragma unroll
  for (int i = 0; i < ROWS / kRowsPerPass; ++i) {
    const int row = tid / 8 + i * kRowsPerPass;
    int64_t k_at, v_at;
    const bool valid = kv_row_at(kv, key0 + row, valid_end, k_at, v_at, ok);
    f(i, row, valid, k_at, v_at);
  }
  return ok;
}

// Starts the copy of keys [key0, key0 + ROWS) into swizzled tiles of K (DK-wide) and V
// (DV-wide: the first DV values of each V row, so V can be a prefix of the MLA latent row).
// Eight threads share a row (chunks c, c + 8, ...), so each thread looks up the block table
// once per row it copies, for K and V together. Keys at or past `valid_end` are zero-filled
// (their slots may hold anything, NaN included). Returns false when a block id it needed was
// outside the cache (that row is zero-filled; the caller turns the result into NaN). FP8 caches
// are read with plain loads and converted into the same BF16 tiles (synchronous, so the tile
// is complete once the caller's barrier is passed, as cp.async's is after its wait). The
// prefill kernel takes only its first FP8 tile this way; Fp8KvFetch keeps later ones in flight
// (the decode kernel stages raw codes instead: fp8_raw_tile.cuh).
template <int DK, int DV, int ROWS, int THREADS>
__device__ __forceinline__ bool load_kv_tiles(char* k_tile, char* v_tile, const PagedKv& kv,
                                              int key0, int valid_end, int tid) {
  const int c0 = tid % 8;
  return for_each_kv_row<ROWS, THREADS>(kv, key0, valid_end, tid, [&](int, int row, bool valid,
                                                                      int64_t k_at, int64_t v_at) {
    if (kv.fp8) {
      const uint8_t* k_src = static_cast<const uint8_t*>(kv.k_cache) + k_at;
      const uint8_t* v_src = static_cast<const uint8_t*>(kv.v_cache) + v_at;
#pragma unroll
      for (int c = c0; c < DK / 8; c += 8)
        fp8x8_to_bf16(k_tile + swz<DK>(row, c),
                      valid ? *reinterpret_cast<const uint2*>(k_src + c * 8) : make_uint2(0, 0),
                      kv.k_scale);
#pragma unroll
      for (int c = c0; c < DV / 8; c += 8)
        fp8x8_to_bf16(v_tile + swz<DV>(row, c),
                      valid ? *reinterpret_cast<const uint2*>(v_src + c * 8) : make_uint2(0, 0),
                      kv.v_scale);
      return;
    }
    const bf16* k_src = static_cast<const bf16*>(kv.k_cache) + k_at;
    const bf16* v_src = static_cast<const bf16*>(kv.v_cache) + v_at;
#pragma unroll
    for (int c = c0; c < DK / 8; c += 8) cp_async16(k_tile + swz<DK>(row, c), k_src + c * 8, valid);
#pragma unroll
    for (int c = c0; c < DV / 8; c += 8) cp_async16(v_tile + swz<DV>(row, c), v_src + c * 8, valid);
  });
}

// An FP8 K/V tile in two steps, so its loads are in flight while the previous tile is used:
// fetch() issues this thread's plain loads of the raw codes into registers (the rows
// load_kv_tiles gives it); store() converts them into the BF16 tiles (the first use of the
// registers, so only it waits for memory). The prefill kernel's FP8 path.
template <int DK, int DV, int ROWS, int THREADS>
struct Fp8KvFetch {
  static_assert(DK % 64 == 0 && DV % 64 == 0 && DV > 0, "whole 8-chunk rows of K and V");
  static constexpr int kRowsPerPass = THREADS / 8;
  static constexpr int kPasses = ROWS / kRowsPerPass;
  // Thread tid % 8 of a row holds its D / 64 consecutive 8-code chunks (16-byte loads where
  // that is a whole number of them: a 128-wide row is one contiguous 128-byte run per 8 lanes).
  static constexpr int kKC = DK / 64, kVC = DV / 64;
  uint2 k[kPasses][kKC];
  uint2 v[kPasses][kVC];

  template <int NC>
  __device__ __forceinline__ static void load(uint2 (&dst)[NC], const uint8_t* src, bool valid) {
    if (!valid) {
#pragma unroll
      for (int j = 0; j < NC; ++j) dst[j] = make_uint2(0, 0);
    } else if constexpr (NC % 2 == 0) {
#pragma unroll
      for (int j = 0; j < NC; j += 2) {
        const uint4 w = __ldg(reinterpret_cast<const uint4*>(src) + j / 2);
        dst[j] = make_uint2(w.x, w.y);
        dst[j + 1] = make_uint2(w.z, w.w);
      }
    } else {
#pragma unroll
      for (int j = 0; j < NC; ++j) dst[j] = __ldg(reinterpret_cast<const uint2*>(src) + j);
    }
  }

  __device__ __forceinline__ bool fetch(const PagedKv& kv, int key0, int valid_end, int tid) {
    const int c0 = tid % 8;
    return for_each_kv_row<ROWS, THREADS>(
        kv, key0, valid_end, tid, [&](int i, int, bool valid, int64_t k_at, int64_t v_at) {
          load(k[i], static_cast<const uint8_t*>(kv.k_cache) + k_at + c0 * kKC * 8, valid);
          load(v[i], static_cast<const uint8_t*>(kv.v_cache) + v_at + c0 * kVC * 8, valid);
        });
  }

  __device__ __forceinline__ void store(char* k_tile, char* v_tile, const PagedKv& kv,
                                        int tid) const {
    const int c0 = tid % 8;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int row = tid / 8 + i * kRowsPerPass;
#pragma unroll
      for (int j = 0; j < kKC; ++j)
        fp8x8_to_bf16(k_tile + swz<DK>(row, c0 * kKC + j), k[i][j], kv.k_scale);
#pragma unroll
      for (int j = 0; j < kVC; ++j)
        fp8x8_to_bf16(v_tile + swz<DV>(row, c0 * kVC + j), v[i][j], kv.v_scale);
    }
  }
};

// Row max / sum over the four lanes of a quad (the lanes that share a C-fragment row).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

}  // namespace kite::cuda::attention::mma
