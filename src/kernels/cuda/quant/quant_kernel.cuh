// Device pieces shared by the quantized-linear kernels (quant_linear.cu: the tensor-core and
// decode kernels; quant_gemv_bulk.cu: the bulk-copy decode GEMV): the kernel parameters, the
// output store, and the dequantization helpers (the MMAs: kernels/cuda/mma_sync.cuh). Internal to
// src/kernels/cuda/quant.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma_sync.cuh"

namespace kite::cuda::quant_detail {

enum Fmt : int { kW4 = 0, kFp8Ch = 1, kI8Ch = 2, kFp8Blk = 3 };

// Two E4M3 codes (the low 16 bits of v, first code in the low byte) as an f16x2, exactly (every
// E4M3 value is an f16 value).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t v) {
  uint32_t d;
  asm("{\n .reg .b16 lo;\n cvt.u16.u32 lo, %1;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n}\n"
      : "=r"(d)
      : "r"(v));
  return d;
}

// W8A16's activations go into the f16 MMA scaled by 2^-8 (the sums are scaled back by 2^8):
// f16 alone would saturate at 65,504, which large activations (a gated MLP's down input) can
// pass; scaled, |x| up to 1.6e7 fits, every BF16 value of magnitude 2^-9 or more is exact, and
// smaller ones are off by at most 2^-17. Both scalings are exact powers of two.
constexpr float kA16XScale = 0x1p-8f;
constexpr float kA16SumScale = 0x1p8f;
// A bf16x2 times kA16XScale as an f16x2 (rounded to nearest, saturated to +-65504).
__device__ __forceinline__ uint32_t bf16x2_to_scaled_f16x2(uint32_t v) {
  uint32_t d;
  asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n"
      : "=r"(d)
      : "f"(__uint_as_float(v & 0xFFFF0000u) * kA16XScale),
        "f"(__uint_as_float(v << 16) * kA16XScale));
  return d;
}

__device__ __forceinline__ uint32_t sub_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("sub.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// W4A16's A fragment for one k16 step from one 32-bit code word (nibbles 0..7; fragment
// registers a0..a3 take nibble pairs (0,4), (1,5), (2,6), (3,7)), as exact BF16 (q - zero):
// each pair is masked into the mantissa of 128.0 (0x4300) by one LOP3 (written out: the
// compiler splits a mask-and-or of two immediates into two) and (128 + zero) is subtracted.
// z0 / z1: w4_zero2() of rows g and g + 8. The kernels are instruction-bound, so this counts.
template <uint32_t kMask, uint32_t kMagic>
__device__ __forceinline__ uint32_t and_or(uint32_t a) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "n"(kMask), "n"(kMagic));
  return d;
}
__device__ __forceinline__ uint32_t w4_zero2(uint32_t zero) {  // (128 + zero) twice, one PRMT
  return __byte_perm(zero, 0x43u, 0x4040);
}
__device__ __forceinline__ void w4_frag(uint32_t q, uint32_t z0, uint32_t z1, uint32_t (&a)[4]) {
  a[0] = sub_bf16x2(and_or<0x000F000Fu, 0x43004300u>(q), z0);
  a[1] = sub_bf16x2(and_or<0x000F000Fu, 0x43004300u>(q >> 4), z1);
  a[2] = sub_bf16x2(and_or<0x000F000Fu, 0x43004300u>(q >> 8), z0);
  a[3] = sub_bf16x2(and_or<0x000F000Fu, 0x43004300u>(q >> 12), z1);
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// ---------------------------------------------------------------------------------------------
// Activation encoding, shared by the activation kernels (quant_activation.cu) and the bulk
// GEMV's in-block quantization (quant_gemv_bulk.cu), so both give the CPU op's codes.

// x * input_scale[i] as the CPU reference rounds it, or x without an input_scale.
__device__ __forceinline__ float input_scaled(float v, const float* __restrict__ is, int64_t i) {
  return is ? __fmul_rn(v, is[i]) : v;
}

template <bool kInt8>
__device__ __forceinline__ uint8_t encode8(float v) {
  if constexpr (kInt8) {
    const int q = max(-127, min(127, __float2int_rn(v)));
    return static_cast<uint8_t>(static_cast<int8_t>(q));
  } else {
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  }
}

// ---------------------------------------------------------------------------------------------
// Kernel parameters (one struct for every quantized kernel) and the output store.

struct KParams {
  const uint8_t* codes;
  const float* wscale;
  const uint8_t* zeros;  // W4
  const void* x;         // BF16 (W4) or 8-bit codes (W8A8), [m, ldx]
  const float* xscale;   // W8A8: [m, xcols]
  const void* bias;
  void* y;
  int bias_bf16;
  int m, n, n_pad;
  int nchunks;           // K_pad / 64
  int ldx;               // x row stride, elements
  int chunks_per_group;  // W4: group / 64; FP8 block: block_cols / 64
  int block_rows;        // FP8 block
  int scale_cols;        // FP8 block: weight scale columns = activation groups
  // Split outputs (seg_count > 1): output features [seg_begin[s], seg_begin[s + 1]) go to
  // seg_y[s], [m, width_s] (q, k and v of one stacked weight); else all go to y [m, n].
  void* seg_y[4];
  int seg_begin[5];
  int seg_count;
  // The bulk GEMV's in-block activation quantization (8-bit per channel, M <= 2): when set,
  // each block quantizes these BF16 rows [m, k_real] itself (x and xscale are not read).
  const bf16* xq_src;
  const float* xq_in_scale;  // input_scale or null
  int k_real;
  // A residual-add + RMSNorm folded into that quantization (norm_residual set, K <=
  // kFoldedNormMaxK): the rows quantized are rms_norm(norm_residual + xq_src) * norm_weight,
  // bit for bit what add_rms_norm writes where its block has at most 512 threads (K <= 4,096),
  // and norm_residual_out [m, k_real] (not norm_residual: every block reads all of it) gets
  // norm_residual + xq_src, a share from each block.
  const bf16* norm_residual;
  bf16* norm_residual_out;
  const bf16* norm_weight;
  float norm_eps;
  // FP8 per channel on the bulk GEMV: x is BF16 [m, ldx], read as it is (W8A16: no activation
  // codes or scales; ldx a whole number of chunks, no input_scale).
  int xq_a16;
  // 8-bit bulk GEMV: the ring stages its producer copies before pdl_wait (0: the whole ring).
  int prewait_stages;
};

// The group (W4) or scale column (FP8 block) of 64-channel chunk c >= 0: a shift when
// chunks_per_group is a power of two (group 128: 2), else an integer division (~20
// instructions, in every chunk of the decode kernels' loops).
__device__ __forceinline__ int group_of_chunk(const KParams& p, int c) {
  const unsigned cpg = static_cast<unsigned>(p.chunks_per_group);
  if ((cpg & (cpg - 1)) == 0) return c >> (__ffs(p.chunks_per_group) - 1);
  return c / p.chunks_per_group;
}

// FP8 block: the weight scales of rows g and g + 8 of a tile (row_g = its row g) in scale
// column kb, rows past N clamped to the last (their outputs are not stored).
__device__ __forceinline__ void fp8_block_row_scales(const KParams& p, int row_g, int kb,
                                                     float& sw0, float& sw1) {
  const int r0 = min(row_g, p.n - 1), r1 = min(row_g + 8, p.n - 1);
  sw0 = __ldg(p.wscale + static_cast<int64_t>(r0 / p.block_rows) * p.scale_cols + kb);
  sw1 = __ldg(p.wscale + static_cast<int64_t>(r1 / p.block_rows) * p.scale_cols + kb);
}

template <typename TOut>
__device__ __forceinline__ void store_y(const KParams& p, int tok, int row, float v) {
  if (p.seg_count <= 1) {
    static_cast<TOut*>(p.y)[static_cast<int64_t>(tok) * p.n + row] = from_float<TOut>(v);
    return;
  }
  int s = 0;
  while (s + 1 < p.seg_count && row >= p.seg_begin[s + 1]) ++s;
  const int width = p.seg_begin[s + 1] - p.seg_begin[s];
  static_cast<TOut*>(p.seg_y[s])[static_cast<int64_t>(tok) * width + row - p.seg_begin[s]] =
      from_float<TOut>(v);
}

// The epilogue every quantized kernel ends in: the per-channel formats' row (token) x column
// (output feature) scales, the bias, the store. v is the accumulated dot product.
// xs: the token's activation scale (the per-channel formats; unused by the others).
template <int F, typename TOut>
__device__ __forceinline__ void finish_output(const KParams& p, int tok, int row, float v,
                                              float xs) {
  if constexpr (F == kFp8Ch || F == kI8Ch) v = v * xs * __ldg(p.wscale + row);
  if (p.bias)
    v += p.bias_bf16 ? __bfloat162float(static_cast<const bf16*>(p.bias)[row])
                     : static_cast<const float*>(p.bias)[row];
  store_y<TOut>(p, tok, row, v);
}
template <int F, typename TOut>
__device__ __forceinline__ void finish_output(const KParams& p, int tok, int row, float v) {
  float xs = 1.0f;
  if constexpr (F == kFp8Ch || F == kI8Ch) xs = __ldg(p.xscale + tok);
  finish_output<F, TOut>(p, tok, row, v, xs);
}

// The register-ring decode kernel (quant_decode.cu) for M <= 8, every format, and its gated W4
// form (p.n = the features I, I % 16 == 0, no bias: y [m, I] BF16 = silu(x Wg^T) * (x Wu^T)).
// W4 on its lean form (w4_lean_applies: group 128, an even chunk count) takes up to
// kW4DecodeMaxRows rows, in token tiles of 8.
constexpr int kW4DecodeMaxRows = 128;
bool w4_lean_applies(int chunks_per_group, int64_t nchunks);
// The override (set_quant_decode_override) forces warps per 16-row tile and chunks in flight
// per warp; 0 leaves each automatic.
struct DecodeOverride {
  int kw = 0, u = 0;
};
template <int F, typename TOut>
void launch_qdec(const KParams& p, const DecodeOverride& o, cudaStream_t stream);
void launch_qdec_w4_silu(const KParams& p, const DecodeOverride& o, cudaStream_t stream);

// The bulk-copy decode GEMV (quant_gemv_bulk.cu) for M <= 8: kW4, kFp8Ch and kI8Ch; the 8-bit
// formats up to kBulkMaxRows on codes quantized before or (FP8) BF16 x (xq_a16), not xq_src.
constexpr int kBulkMaxRows = 16;
template <int F, typename TOut>
void launch_qgemv_bulk(const KParams& p, cudaStream_t stream);

// The same for a gated MLP's stacked [gate; up] weight (kFp8Ch, kI8Ch; p.n = the features,
// n % 8 == 0; no bias, no split): y [m, n] BF16 = silu(x · Wg^T) * (x · Wu^T).
template <int F>
void launch_qgemv_bulk_silu(const KParams& p, cudaStream_t stream);

// The W4A16 GEMM past decode sizes on Hopper's wgmma (quant_w4_wgmma.cu, 9 <= M <= 128; x
// prepared in the codes' k order by launch_w4_prep's mma_order): whether it beats the
// tensor-core kernel for M rows of an n_pad-row weight of nchunks chunks (where it is taken),
// and the launch.
bool w4_wgmma_wins(int64_t m, int64_t n_pad, int64_t nchunks);
// Whether its 128-row blocks of 64 tokens are at least one a SM on an n_pad-row weight.
bool w4_wgmma_fills_sms(int64_t n_pad);
// Its launch for M rows of an n_pad-row weight of nchunks chunks: tokens per block (nt),
// warpgroups per block (wg), K split into `splits` ranges of chunks_per_split chunks, `tiles`
// output tiles (blocks per split). Split K needs w4_wgmma_scratch_bytes of workspace (256-byte
// aligned) whose counters (w4_wgmma_counters, `tiles` ints) are zero at the launch.
struct W4WgmmaPlan {
  int nt, wg, splits, chunks_per_split;
  int64_t tiles;
};
W4WgmmaPlan w4_wgmma_plan(int64_t m, int64_t n_pad, int64_t nchunks);
size_t w4_wgmma_scratch_bytes(const W4WgmmaPlan& plan, int64_t m, int64_t n_pad);
int* w4_wgmma_counters(const W4WgmmaPlan& plan, void* scratch);
template <typename TOut>
void launch_w4_wgmma(const KParams& p, const W4WgmmaPlan& plan, void* scratch, cudaStream_t stream);

// Its in-block activation quantization (KParams::xq_src): at most this many rows, and rows x
// padded K codes of at most this many bytes (shared memory beside the ring).
constexpr int kFusedQuantRows = 2;
constexpr int kFusedQuantMaxBytes = 64 * 1024;
// Its folded norm keeps each thread's share of a row in registers: K at most this.
constexpr int kFoldedNormMaxK = 16384;

}  // namespace kite::cuda::quant_detail
