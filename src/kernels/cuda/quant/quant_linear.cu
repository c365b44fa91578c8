// Quantized linear kernels and the op (see quant_linear.h for the formats, layouts and
// numerics); uploading and dummy weights are in quant_weights.cu.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/env_switch.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/quant/fp8_gemm_lt.h"
#include "kernels/cuda/quant/quant_activation.h"
#include "kernels/cuda/quant/quant_args.h"
#include "kernels/cuda/quant/quant_geometry.h"
#include "kernels/cuda/quant/quant_kernel.cuh"
#include "kernels/cuda/quant/quant_linear.h"
#include "kernels/cuda/quant/w4_dequant.h"
#include "kernels/cuda/stream.h"

namespace kite::cuda {
namespace {

using namespace quant_detail;

constexpr const char* kOp = "quantized_linear";

Fmt fmt_of(QuantFormat f) {
  switch (f) {
    case QuantFormat::kInt4Group:
      return kW4;
    case QuantFormat::kFp8PerChannel:
      return kFp8Ch;
    case QuantFormat::kInt8PerChannel:
      return kI8Ch;
    case QuantFormat::kFp8Block:
      return kFp8Blk;
  }
  return kW4;
}

// ---------------------------------------------------------------------------------------------
// The GEMM kernel. A block is WR x KW warps: WR warps on consecutive 16-row weight tiles, KW
// warps splitting the 64-channel chunks between them (warp wk takes U consecutive chunks every
// KW * U); NT token tiles of 8 (tokens blockIdx.y * NT * 8 ...). Partial sums of the KW warps
// of a row tile are added through shared memory by the wk == 0 warp, which writes y.

template <int F, int NT, int WR, int KW, typename TOut>
__global__ void __launch_bounds__(WR* KW * 32) qmma_kernel(const KParams p) {
  using Acc = std::conditional_t<F == kI8Ch, int, float>;
  constexpr bool kW4F = F == kW4;
  constexpr int U = NT <= 2 ? 4 : 2;  // chunks whose loads are in flight per warp
  constexpr int WL = kW4F ? 1 : 2;    // 16-byte weight loads per lane per chunk
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wr = warp % WR, wk = warp / WR;
  const int tile = blockIdx.x * WR + wr;  // 16-row weight tile
  const int row_g = tile * 16 + g;        // this lane's A rows: row_g, row_g + 8
  const int tok0 = blockIdx.y * (NT * 8);
  const int64_t kpad = static_cast<int64_t>(p.nchunks) * kChunk;

  Acc acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = Acc(0);

  for (int c0 = wk * U; c0 < p.nchunks; c0 += KW * U) {
    // Issue every load of the U chunks (weights streamed past L1, activations through it)
    // before the first use, so one memory latency covers them all.
    uint4 wv[U][WL];
    uint4 xv[U][NT][kW4F ? 2 : 1];
    float ws[U][kW4F ? 2 : 1];     // W4: group scales of rows g, g + 8
    uint32_t wz[U][kW4F ? 2 : 1];  // W4: group zeros
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u;
      if (c < p.nchunks) {
        if constexpr (kW4F) {
          wv[u][0] = __ldcs(reinterpret_cast<const uint4*>(p.codes) +
                            (static_cast<int64_t>(tile) * p.nchunks + c) * 32 + lane);
          const int64_t so = static_cast<int64_t>(group_of_chunk(p, c)) * p.n_pad + row_g;
          ws[u][0] = __ldg(p.wscale + so);
          ws[u][1] = __ldg(p.wscale + so + 8);
          wz[u][0] = __ldg(p.zeros + so);
          wz[u][1] = __ldg(p.zeros + so + 8);
        } else {
          const uint8_t* base = p.codes + static_cast<int64_t>(row_g) * kpad + c * kChunk + 16 * t;
          wv[u][0] = __ldcs(reinterpret_cast<const uint4*>(base));
          wv[u][1] = __ldcs(reinterpret_cast<const uint4*>(base + 8 * kpad));
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int tok = tok0 + j * 8 + g;
        if (c < p.nchunks && tok < p.m) {
          if constexpr (kW4F) {
            const uint4* xp = reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) +
                                                             static_cast<int64_t>(tok) * p.ldx +
                                                             c * kChunk + 16 * t);
            xv[u][j][0] = __ldg(xp);
            xv[u][j][1] = __ldg(xp + 1);
          } else {
            xv[u][j][0] = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.x) +
                                                               static_cast<int64_t>(tok) * p.ldx +
                                                               c * kChunk + 16 * t));
          }
        } else {
#pragma unroll
          for (int h = 0; h < (kW4F ? 2 : 1); ++h) xv[u][j][h] = make_uint4(0, 0, 0, 0);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u;
      if (c >= p.nchunks) break;
      if constexpr (kW4F) {
        const float s0 = ws[u][0], s1 = ws[u][1];
        const uint32_t z0 = w4_zero2(wz[u][0]), z1 = w4_zero2(wz[u][1]);
        float ct[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) ct[j][i] = 0.0f;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          uint32_t a[4];
          w4_frag(word(wv[u][0], s), z0, z1, a);
#pragma unroll
          for (int j = 0; j < NT; ++j)
            mma_bf16(ct[j], a, word(xv[u][j][s >> 1], (s & 1) * 2),
                     word(xv[u][j][s >> 1], (s & 1) * 2 + 1));
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          acc[j][0] = fmaf(ct[j][0], s0, acc[j][0]);
          acc[j][1] = fmaf(ct[j][1], s0, acc[j][1]);
          acc[j][2] = fmaf(ct[j][2], s1, acc[j][2]);
          acc[j][3] = fmaf(ct[j][3], s1, acc[j][3]);
        }
      } else if constexpr (F == kFp8Blk) {
        const int kb = group_of_chunk(p, c);
        float sw0, sw1;
        fp8_block_row_scales(p, row_g, kb, sw0, sw1);
        float ct[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) ct[j][i] = 0.0f;
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const uint32_t a[4] = {word(wv[u][0], 2 * s), word(wv[u][1], 2 * s),
                                 word(wv[u][0], 2 * s + 1), word(wv[u][1], 2 * s + 1)};
#pragma unroll
          for (int j = 0; j < NT; ++j)
            mma_8bit(ct[j], a, word(xv[u][j][0], 2 * s), word(xv[u][j][0], 2 * s + 1));
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const int ta = tok0 + j * 8 + 2 * t;
          const float sx0 =
              ta < p.m ? __ldg(p.xscale + static_cast<int64_t>(ta) * p.scale_cols + kb) : 0.0f;
          const float sx1 = ta + 1 < p.m
                                ? __ldg(p.xscale + static_cast<int64_t>(ta + 1) * p.scale_cols + kb)
                                : 0.0f;
          acc[j][0] = fmaf(ct[j][0], sw0 * sx0, acc[j][0]);
          acc[j][1] = fmaf(ct[j][1], sw0 * sx1, acc[j][1]);
          acc[j][2] = fmaf(ct[j][2], sw1 * sx0, acc[j][2]);
          acc[j][3] = fmaf(ct[j][3], sw1 * sx1, acc[j][3]);
        }
      } else {  // per-channel FP8 / INT8: one accumulator over all of K, scales at the end
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const uint32_t a[4] = {word(wv[u][0], 2 * s), word(wv[u][1], 2 * s),
                                 word(wv[u][0], 2 * s + 1), word(wv[u][1], 2 * s + 1)};
#pragma unroll
          for (int j = 0; j < NT; ++j)
            mma_8bit(acc[j], a, word(xv[u][j][0], 2 * s), word(xv[u][j][0], 2 * s + 1));
        }
      }
    }
  }

  // Sum the KW partials of each row tile.
  if constexpr (KW > 1) {
    __shared__ Acc red[WR][NT * 4][32];
#pragma unroll 1
    for (int src = 1; src < KW; ++src) {
      if (wk == src)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) red[wr][j * 4 + i][lane] = acc[j][i];
      __syncthreads();
      if (wk == 0)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[j][i] += red[wr][j * 4 + i][lane];
      __syncthreads();
    }
  }
  if (wk != 0) return;
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row_g + (i >= 2 ? 8 : 0);
      const int tok = tok0 + j * 8 + 2 * t + (i & 1);
      if (row >= p.n || tok >= p.m) continue;
      finish_output<F, TOut>(p, tok, row, static_cast<float>(acc[j][i]));
    }
}

template <int F, int NT, int WR, int KW, typename TOut>
void launch_cfg(const KParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_pad / (16 * WR)),
                  static_cast<unsigned>(ceil_div(p.m, NT * 8)));
  qmma_kernel<F, NT, WR, KW, TOut><<<grid, WR * KW * 32, 0, stream>>>(p);
  KITE_CUDA_CHECK_LAUNCH();
}

// set_quant_decode_override (benchmarks and tests): path 0 automatic, 1 tensor core, 2 decode
int g_dec_path = 0, g_dec_kw = 0, g_dec_u = 0;

// KITE_CUDA_QGEMV_BULK=0 keeps M <= 8 off the bulk-copy GEMV in automatic mode (an A/B switch:
// per-channel FP8/INT8 then take the tensor-core kernel, as before the bulk GEMV).
const bool g_bulk_auto = !env_switched_off("KITE_CUDA_QGEMV_BULK");

// KITE_CUDA_QGEMV_FUSED_QUANT=0 keeps the separate activation-quantization kernel in front of
// the bulk GEMV at M <= 2 (an A/B switch).
const bool g_fused_quant_auto = !env_switched_off("KITE_CUDA_QGEMV_FUSED_QUANT");

// M <= 8: the bulk-copy GEMV (quant_gemv_bulk.cu) for per-channel FP8/INT8 (Llama-3-8B FP8
// batch-1 decode 3.29 against 3.59 ms on the tensor-core kernel); W4A16 and FP8 block on the
// decode kernel (W4A16 on the bulk GEMV measured 3.50 against 2.96 ms: its consumers, not the
// copies, are the limit; BENCHMARKS.md, run 6). Paths 3 and 4 force the bulk GEMV for W4A16 too.
// From 9 to g_bulk_rows (16) rows, per-channel FP8 / INT8 take it too, with 2 token tiles per
// weight tile (their activations quantized by the kernel before), instead of the tensor-core
// kernel: Llama-3-8B's four decode linears 4-15 % faster, its FP8 / INT8 decode steps at batch
// 12-16 4-6 % (H100, BENCHMARKS.md run 34). KITE_CUDA_QBULK_ROWS=8 is the form before (an A/B
// switch; set_quant_bulk_rows for tests and benchmarks).
int g_bulk_rows = static_cast<int>(
    std::clamp<long long>(env_number("KITE_CUDA_QBULK_ROWS", kBulkMaxRows), 8, kBulkMaxRows));
bool takes_bulk(Fmt f, int64_t m) {
  if (f == kFp8Blk) return false;
  const bool eight_bit = f == kFp8Ch || f == kI8Ch;
  if (m > (eight_bit ? g_bulk_rows : 8)) return false;
  return g_dec_path >= 3 || (g_dec_path == 0 && eight_bit && g_bulk_auto);
}

// Whether the bulk GEMV quantizes the activations itself (KParams::xq_src; path 4 and the
// switch above keep the separate kernel).
bool fuses_act_quant(Fmt f, int64_t m, int64_t k, int64_t kpad) {
  return (f == kFp8Ch || f == kI8Ch) && takes_bulk(f, m) && g_dec_path != 4 &&
         g_fused_quant_auto && m <= kFusedQuantRows && k % 8 == 0 &&
         m * kpad <= kFusedQuantMaxBytes;
}

// W4A16 from 9 to 128 rows: the wgmma GEMM of quant_w4_wgmma.cu where it measured faster than
// the tensor-core kernel (w4_wgmma_wins), else that kernel (set_w4_gemm_override: -1 always the
// tensor-core kernel, 1 the wgmma GEMM at any width and any M above 8, 2 the wgmma GEMM at any
// width from 9 to 128 rows). The A/B switches: KITE_CUDA_W4_GEMM=0 is -1, =2 is 2.
int w4_gemm_mode_from_env() {
  const char* v = std::getenv("KITE_CUDA_W4_GEMM");
  if (v && std::strcmp(v, "2") == 0) return 2;
  return env_switched_off("KITE_CUDA_W4_GEMM") ? -1 : 0;
}
int g_w4_gemm_mode = w4_gemm_mode_from_env();

// W4A16 from 9 rows up to g_w4_decode_rows (32; at most kW4DecodeMaxRows) on the decode
// kernel's lean form, token tiles of 8 over one stream of the weight, where that form applies
// and neither the decode kernel is overridden away nor the wgmma GEMM forced — but past 24
// rows not on weights wide enough for the wgmma GEMM to fill the SMs (the stacked gate_up:
// 41.7 us on the GEMM against 54.3 at M = 32; the narrow ones 26.1 against 40.7 (down), 9.3
// against 14.6 (o); at M = 64 the decode kernel measured no faster than the others:
// BENCHMARKS.md run 22). KITE_CUDA_W4_DECODE_WIDE=0 keeps it at 8 rows (an A/B switch);
// set_w4_decode_rows for tests and benchmarks.
constexpr int64_t kW4DecodeWideWeightRows = 24;
int g_w4_decode_rows = env_switched_off("KITE_CUDA_W4_DECODE_WIDE") ? 8 : 32;
bool takes_w4_wide_decode(int64_t m, int chunks_per_group, int64_t nchunks, int64_t n_pad) {
  return m > 8 && m <= g_w4_decode_rows && (g_dec_path == 0 || g_dec_path == 2) &&
         g_w4_gemm_mode != 1 && w4_lean_applies(chunks_per_group, nchunks) &&
         (m <= kW4DecodeWideWeightRows || !w4_wgmma_fills_sms(n_pad));
}
int w4_chunks_per_group(const DeviceQuantizedWeight& w) {
  return static_cast<int>(std::max<int64_t>(1, w.group_size / kChunk));
}
bool takes_w4_wide_decode(const DeviceQuantizedWeight& w, int64_t m) {
  return takes_w4_wide_decode(m, w4_chunks_per_group(w), w.padded_in / kChunk, w.padded_out);
}

template <int F, typename TOut>
void launch_fmt(const KParams& p, cudaStream_t stream) {
  constexpr bool kBulk = F == kW4 || F == kFp8Ch || F == kI8Ch;
  if constexpr (kBulk) {
    if (takes_bulk(static_cast<Fmt>(F), p.m)) return launch_qgemv_bulk<F, TOut>(p, stream);
  }
  constexpr bool kDecodeDefault = F == kW4 || F == kFp8Blk;
  if ((p.m <= 8 && (g_dec_path >= 2 || (g_dec_path == 0 && kDecodeDefault))) ||
      (F == kW4 && takes_w4_wide_decode(p.m, p.chunks_per_group, p.nchunks, p.n_pad)))
    launch_qdec<F, TOut>(p, DecodeOverride{g_dec_kw, g_dec_u}, stream);
  else if (p.m <= 8)
    launch_cfg<F, 1, 1, 8, TOut>(p, stream);
  else if (p.m <= 16)
    launch_cfg<F, 2, 2, 4, TOut>(p, stream);
  else if (p.m <= 32)
    launch_cfg<F, 4, 2, 4, TOut>(p, stream);
  else
    launch_cfg<F, 8, 2, 4, TOut>(p, stream);
}

template <typename TOut>
void launch_any(Fmt f, const KParams& p, cudaStream_t stream) {
  switch (f) {
    case kW4:
      return launch_fmt<kW4, TOut>(p, stream);
    case kFp8Ch:
      return launch_fmt<kFp8Ch, TOut>(p, stream);
    case kI8Ch:
      return launch_fmt<kI8Ch, TOut>(p, stream);
    case kFp8Blk:
      return launch_fmt<kFp8Blk, TOut>(p, stream);
  }
}

// ---------------------------------------------------------------------------------------------
}  // namespace

void set_quant_decode_override(int path, int kw, int u) {
  g_dec_path = path;
  g_dec_kw = kw;
  g_dec_u = u;
}

void set_w4_decode_rows(int rows) { g_w4_decode_rows = std::clamp(rows, 8, kW4DecodeMaxRows); }

void set_quant_bulk_rows(int rows) { g_bulk_rows = std::clamp(rows, 8, kBulkMaxRows); }

// F32 outputs (an 8-bit lm_head's logits) go through cuBLASLt too, FP8 past kLtMinRows rows and
// INT8 past 32: Llama-3's lm_head (128,256 x 4,096) at 17-128 rows took 200-263 us there against
// 223-1,112 on the kernels here, and INT8 at 17-32 rows 354-370 against 190-212, 48-128 rows
// 219-257 against 389-906 (H100, BENCHMARKS.md run 33; cuBLASLt's INT8 algorithm for 32 rows or
// fewer is the slow one). KITE_CUDA_LT_F32_OUT=0 keeps F32 outputs on the kernels here (A/B).
namespace {
const bool g_lt_f32_out = !env_switched_off("KITE_CUDA_LT_F32_OUT");
constexpr int64_t kLtInt8F32MinRows = 32;
bool lt_takes_output(Fmt f, int64_t m, const Tensor& y) {
  if (y.dtype() != DType::kF32) return true;
  return g_lt_f32_out && (f == kFp8Ch || m > kLtInt8F32MinRows);
}
}  // namespace

// Rows above which FP8 / INT8 per channel prefer cuBLASLt (fp8_gemm_lt.h) to the kernels here.
constexpr int64_t kLtMinRows = 16;
static_assert(kLtMinRows >= kBulkMaxRows, "cuBLASLt's rows start past the bulk GEMV's");
// Rows one launch sequence takes (quantized_linear_split slices larger M).
constexpr int64_t kMaxRowsPerCall = 32768;
// Rows above which W4A16 expands its weight to BF16 for one cuBLASLt GEMM (w4_dequant.h).
constexpr int64_t kW4DequantMinRows = 128;

namespace {
bool takes_w4_gemm(const DeviceQuantizedWeight& w, int64_t m) {
  if (w.format != QuantFormat::kInt4Group || m <= 8 || g_w4_gemm_mode < 0) return false;
  if (g_w4_gemm_mode == 1) return true;  // measurements and tests: at any M
  if (takes_w4_wide_decode(w, m)) return false;
  return m <= kW4DequantMinRows &&
         (g_w4_gemm_mode == 2 || w4_wgmma_wins(m, w.padded_out, w.padded_in / kChunk));
}
W4WgmmaPlan w4_plan(const DeviceQuantizedWeight& w, int64_t m) {
  return w4_wgmma_plan(m, w.padded_out, w.padded_in / kChunk);
}
}  // namespace

void set_w4_gemm_override(int mode) { g_w4_gemm_mode = mode; }

bool takes_lt_route(const DeviceQuantizedWeight& w, int64_t m) {
  if (w.format == QuantFormat::kFp8PerChannel || w.format == QuantFormat::kInt8PerChannel)
    return m > kLtMinRows;
  return w.format == QuantFormat::kInt4Group && m > kW4DequantMinRows;
}

// The 8-bit formats' activation codes [M, K_pad] come first in their buffer (a linear's
// workspace, or codes made ahead), their scales at codes_scales_offset after them; a cuBLASLt
// route's F32 / S32 [M, N] scratch for the unscaled product follows at lt_scratch_offset.
namespace {
int64_t codes_scales_offset(int64_t m, int64_t kp) { return round_up(m * kp, 256); }
int64_t lt_scratch_offset(int64_t m, int64_t kp) {
  return codes_scales_offset(m, kp) + round_up(m * 4, 256);
}
}  // namespace

size_t quantized_linear_workspace_bytes(const DeviceQuantizedWeight& w, int64_t m) {
  const size_t kp = static_cast<size_t>(w.padded_in),
               mm = static_cast<size_t>(std::max<int64_t>(m, 0));
  if (w.format == QuantFormat::kInt4Group)  // x prepared; then the wgmma GEMM's split K or W
    return static_cast<size_t>(round_up(static_cast<int64_t>(mm * kp * 2), 256)) +
           (takes_w4_gemm(w, m) ? w4_wgmma_scratch_bytes(w4_plan(w, m), m, w.padded_out) : 0) +
           (takes_lt_route(w, m) ? static_cast<size_t>(w.padded_out) * kp * 2 : 0);
  const size_t groups = w.format == QuantFormat::kFp8Block
                            ? static_cast<size_t>(ceil_div(w.in_features, w.block_cols))
                            : 1;
  const auto rows = static_cast<int64_t>(mm);
  // FP8 / INT8 per channel beyond decode sizes: cuBLASLt's scratch after the codes and scales.
  if (takes_lt_route(w, m))
    return static_cast<size_t>(lt_scratch_offset(rows, w.padded_in)) +
           static_cast<size_t>(fp8_gemm_scratch_floats(m, w.out_features)) * 4;
  return static_cast<size_t>(codes_scales_offset(rows, w.padded_in)) + mm * groups * 4;
}

// FP8 per channel from two rows on the bulk GEMV (M <= 8) reads its activations as BF16
// (W8A16) instead of quantizing them (in every block at two rows, by a kernel of its own past
// that). Llama-3-8B FP8 decode steps with W8A16 against W8A8, H100: batch 2 3.32 against 3.63
// ms, batch 4 3.42 against 3.81, batch 8 3.59 against 3.97; DeepSeek-V2-Lite 3-8 % less
// (BENCHMARKS.md, run 29). At one row Llama-3-8B's step was 5 % slower with it (run 28), so
// one row keeps W8A8. KITE_CUDA_FP8_DECODE_A16=0 keeps every row count on W8A8 (an A/B switch).
// From 9 to 16 rows (two token tiles) W8A16 saves the activation-quantization launch before the
// GEMV but doubles its x conversions and MMAs: it pays on weights of up to 64 Mi elements
// (Llama-3-8B's q/k/v, o, down: decode steps at batch 9-16 3-4 % faster, DeepSeek-V2-Lite
// 1.4-1.9 %) and not on the stacked gate_up (117 M: 50.4 against 46.7 us at 9 rows), whose
// consumers set its pace (H100, BENCHMARKS.md run 34). KITE_CUDA_FP8_A16_ROWS=8 keeps 9-16 rows on
// W8A8 (an A/B switch).
const bool g_fp8_a16_auto = !env_switched_off("KITE_CUDA_FP8_DECODE_A16");
constexpr int64_t kFp8A16MinRows = 2;
const int64_t g_fp8_a16_max_rows = env_number("KITE_CUDA_FP8_A16_ROWS", kBulkMaxRows);
constexpr int64_t kFp8A16MidMaxElems = int64_t{64} << 20;

bool quantized_linear_reads_bf16_activations(const DeviceQuantizedWeight& w, int64_t m) {
  const Fmt f = fmt_of(w.format);
  if (f != kFp8Ch || w.input_scale.defined() || w.in_features % kChunk != 0 || !takes_bulk(f, m))
    return false;
  if (g_dec_path == 5) return true;
  if (m > 8 && w.out_features * w.in_features > kFp8A16MidMaxElems) return false;
  return g_dec_path == 0 && g_fp8_a16_auto && m >= kFp8A16MinRows && m <= g_fp8_a16_max_rows;
}

bool quantized_linear_reads_activation_codes(const DeviceQuantizedWeight& w, int64_t m) {
  const Fmt f = fmt_of(w.format);
  return (f == kFp8Ch || f == kI8Ch) && m > 0 && m <= kMaxRowsPerCall && w.in_features % 8 == 0 &&
         !quantized_linear_reads_bf16_activations(w, m) &&
         !fuses_act_quant(f, m, w.in_features, w.padded_in);
}

namespace {
std::atomic<int64_t> g_folded_norm_launches{0};
}  // namespace
int64_t folded_norm_launches() { return g_folded_norm_launches.load(); }

bool quantized_linear_takes_folded_norm(const DeviceQuantizedWeight& w, int64_t m) {
  const Fmt f = fmt_of(w.format);
  return m > 0 && !quantized_linear_reads_bf16_activations(w, m) &&
         fuses_act_quant(f, m, w.in_features, w.padded_in) && w.in_features <= kFoldedNormMaxK;
}

// One row only: at two the blocks normalise and quantize two rows one after the other, and
// Llama-3-8B INT8 h8 batch 2 measured 0.2 % slower folded (H100, BENCHMARKS.md run 40).
bool quantized_linear_folds_norm(const DeviceQuantizedWeight& w, int64_t m) {
  static const bool on = !env_switched_off("KITE_CUDA_FOLD_NORM");
  return on && m == 1 && quantized_linear_takes_folded_norm(w, m);
}

size_t activation_codes_bytes(const DeviceQuantizedWeight& w, int64_t m) {
  return static_cast<size_t>(codes_scales_offset(m, w.padded_in) + m * 4);
}

size_t norm_codes_bytes(const DeviceQuantizedWeight& w, int64_t m) {
  static const bool on = !env_switched_off("KITE_CUDA_NORM_CODES");
  return on && quantized_linear_reads_activation_codes(w, m) ? activation_codes_bytes(w, m) : 0;
}

void* ready_codes(const Tensor* codes, const DeviceQuantizedWeight& w, int64_t m, const char* op) {
  if (!codes) return nullptr;
  KITE_CUDA_OP_CHECK(codes->size_bytes() >= activation_codes_bytes(w, m), op,
                     "activation codes of " + std::to_string(codes->size_bytes()) +
                         " bytes, needs " + std::to_string(activation_codes_bytes(w, m)));
  return const_cast<void*>(codes->raw());  // written by the norm, read by the linear
}

NormActivationCodes norm_activation_codes(const DeviceQuantizedWeight& w, int64_t m, void* buffer) {
  auto* q = static_cast<uint8_t*>(buffer);
  return NormActivationCodes{q, reinterpret_cast<float*>(q + codes_scales_offset(m, w.padded_in)),
                             w.input_scale.defined() ? w.input_scale.data<float>() : nullptr,
                             static_cast<int>(w.padded_in),
                             w.format == QuantFormat::kInt8PerChannel};
}

namespace {

// The weight's part of the kernel parameters, for M rows.
void set_weight_params(KParams& p, const DeviceQuantizedWeight& w, int64_t m) {
  p.codes = static_cast<const uint8_t*>(w.codes.raw());
  p.wscale = w.scales.data<float>();
  p.zeros = w.zeros.defined() ? w.zeros.data<uint8_t>() : nullptr;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(w.out_features);
  p.n_pad = static_cast<int>(w.padded_out);
  p.nchunks = static_cast<int>(w.padded_in / kChunk);
  p.block_rows = static_cast<int>(w.block_rows);
}

// The 8-bit formats' activation codes [m, kp] at the workspace's start and their scales after
// them, made the kernels' x and xscale.
struct ActivationCodes {
  uint8_t* q;
  float* sx;
};
ActivationCodes point_at_activation_codes(KParams& p, uint8_t* ws, int64_t m, int64_t kp) {
  const ActivationCodes codes{ws, reinterpret_cast<float*>(ws + codes_scales_offset(m, kp))};
  p.x = codes.q;
  p.ldx = static_cast<int>(kp);
  p.xscale = codes.sx;
  return codes;
}

// FP8 / INT8 per channel: the per-token codes and scales made into `codes` (or, where the norm
// before made them, `codes` pointing there); or, where the bulk GEMV quantizes in-block, its
// source rows handed to it; or x itself where it reads BF16 activations (xq_a16).
void prepare_per_channel_activations(KParams& p, Fmt f, const DeviceQuantizedWeight& w,
                                     const bf16* xb, int64_t m, const ActivationCodes& codes,
                                     bool codes_ready, cudaStream_t stream,
                                     const FoldedNorm* fold) {
  const int64_t k = w.in_features, kp = w.padded_in;
  const float* is = w.input_scale.defined() ? w.input_scale.data<float>() : nullptr;
  if (quantized_linear_reads_bf16_activations(w, m)) {  // x as it is, no codes
    p.x = xb;
    p.ldx = static_cast<int>(k);
    p.xq_a16 = 1;
  } else if (fuses_act_quant(f, m, k, kp)) {
    p.xq_src = xb;
    p.xq_in_scale = is;
    p.k_real = static_cast<int>(k);
    if (fold) {  // checked by check_folded_norm
      g_folded_norm_launches.fetch_add(1, std::memory_order_relaxed);
      p.norm_residual = fold->residual->data<bf16>();
      p.norm_residual_out = fold->residual_out->data<bf16>();
      p.norm_weight = fold->weight->data<bf16>();
      p.norm_eps = fold->eps;
    }
  } else if (!codes_ready) {  // else `codes` already hold them
    launch_act_quant_token(f == kI8Ch, xb, m, k, kp, is, codes.q, codes.sx, stream);
  }
}

// The activation codes the kernels read: made ahead into `ready` (by the norm before), else into
// the workspace by prepare_per_channel_activations.
ActivationCodes activation_codes_for(KParams& p, const DeviceQuantizedWeight& w, int64_t m,
                                     void* workspace, const void* ready) {
  return point_at_activation_codes(
      p, static_cast<uint8_t*>(ready ? const_cast<void*>(ready) : workspace), m, w.padded_in);
}

// W4's BF16 activations as the kernels read them: x itself, or (act order, input_scale, K not a
// whole number of chunks, the wgmma GEMM's k order: mma_order) gathered / scaled / padded /
// reordered into the workspace's start.
void prepare_w4_activations(KParams& p, const DeviceQuantizedWeight& w, const bf16* xb, int64_t m,
                            void* workspace, cudaStream_t stream, bool mma_order = false,
                            int* zero = nullptr, int nzero = 0) {
  const int64_t k = w.in_features, kp = w.padded_in;
  const float* is = w.input_scale.defined() ? w.input_scale.data<float>() : nullptr;
  p.chunks_per_group = w4_chunks_per_group(w);
  if (!mma_order && !w.perm.defined() && !is && k % kChunk == 0) {
    p.x = xb;
    p.ldx = static_cast<int>(k);
  } else {
    auto* xp = static_cast<bf16*>(workspace);
    launch_w4_prep(xb, m, k, kp, w.perm.defined() ? w.perm.data<int32_t>() : nullptr, is, xp,
                   stream, mma_order, zero, nzero);
    p.x = xp;
    p.ldx = static_cast<int>(kp);
  }
}

}  // namespace

void quantized_linear(BlasLtContext& blas, const Tensor& x, const DeviceQuantizedWeight& w,
                      const Tensor* bias, Tensor& y, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream, const void* ready_codes, const FoldedNorm* fold) {
  Tensor* ys[] = {&y};
  quantized_linear_split(blas, x, w, bias, ys, workspace, workspace_bytes, stream, ready_codes,
                         fold);
}

bool quantized_split_applies(const DeviceQuantizedWeight& w, int64_t m, size_t outputs) {
  if (outputs == 1) return true;  // no split: every route takes it
  return outputs >= 2 && outputs <= 4 && !takes_lt_route(w, m);
}

void quantized_linear_split(BlasLtContext& blas, const Tensor& x, const DeviceQuantizedWeight& w,
                            const Tensor* bias, std::span<Tensor* const> ys, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream, const void* ready_codes,
                            const FoldedNorm* fold) {
  check_device(x, DType::kBF16, kOp, "x");
  const int64_t n = w.out_features, k = w.in_features;
  KITE_CUDA_OP_CHECK(k > 0 && x.size(-1) == k, kOp, "x's last dim must be in_features");
  const int64_t m = x.numel() / k;
  KITE_CUDA_OP_CHECK(!ys.empty() && ys.size() <= 4, kOp, "1 to 4 outputs");
  KITE_CUDA_OP_CHECK(ys.size() == 1 || quantized_split_applies(w, m, ys.size()), kOp,
                     "split outputs are not taken by the cuBLASLt routes (FP8 / INT8 per channel "
                     "above " + std::to_string(kLtMinRows) + " rows, INT4 above " +
                         std::to_string(kW4DequantMinRows) + ")");
  int64_t width_sum = 0;
  for (Tensor* y : ys) {
    check_device_float(*y, kOp, "y");
    KITE_CUDA_OP_CHECK(y->dtype() == ys[0]->dtype(), kOp, "outputs must share one dtype");
    KITE_CUDA_OP_CHECK(y->numel() == m * y->size(-1), kOp, "each output must be [M, width]");
    KITE_CUDA_OP_CHECK(!bytes_overlap(x, *y), kOp, "y must not alias x");
    width_sum += y->size(-1);
  }
  KITE_CUDA_OP_CHECK(width_sum == n, kOp, "the outputs' widths must add up to out_features");
  Tensor& y = *ys[0];
  KITE_CUDA_OP_CHECK(reinterpret_cast<uintptr_t>(x.raw()) % 16 == 0, kOp,
                     "x must be 16-byte aligned");
  if (bias) {
    check_device_float(*bias, kOp, "bias");
    KITE_CUDA_OP_CHECK(bias->numel() == n, kOp, "bias must have out_features values");
  }
  KITE_CUDA_OP_CHECK(n < (int64_t{1} << 30) && w.padded_in < (int64_t{1} << 30), kOp,
                     "a dimension over 2^30");
  if (m > 0) check_ready_codes(w, m, ready_codes, kOp);  // none past kMaxRowsPerCall rows
  check_folded_norm(fold, w, x, m, ready_codes, ys, kOp);  // none past 2 rows
  // The prep, activation-quantization and scale kernels put rows on grid.y (at most 65,535): a
  // larger M (a prefill chunk of 65,536 tokens or more) goes through in slices of rows, each
  // with the workspace the whole M was given (a slice needs no more).
  if (m > kMaxRowsPerCall) {
    for (int64_t r0 = 0; r0 < m; r0 += kMaxRowsPerCall) {
      const int64_t r1 = std::min(m, r0 + kMaxRowsPerCall);
      const Tensor xs = x.view({m, k}).slice_rows(r0, r1);
      std::vector<Tensor> slices;
      for (Tensor* yo : ys) slices.push_back(yo->view({m, yo->size(-1)}).slice_rows(r0, r1));
      std::vector<Tensor*> yslices;
      for (Tensor& t : slices) yslices.push_back(&t);
      quantized_linear_split(blas, xs, w, bias, yslices, workspace, workspace_bytes, stream);
    }
    return;
  }
  if (m == 0 || n == 0) return;
  const size_t need = quantized_linear_workspace_bytes(w, m);
  KITE_CUDA_OP_CHECK(
      workspace_bytes >= need && (need == 0 || workspace), kOp,
      "workspace of " + std::to_string(workspace_bytes) + " bytes, needs " + std::to_string(need));
  const Fmt f = fmt_of(w.format);
  const int64_t kp = w.padded_in;
  KParams p{};
  p.bias = bias ? bias->raw() : nullptr;
  p.bias_bf16 = bias && bias->dtype() == DType::kBF16;
  p.y = y.raw();
  p.seg_count = static_cast<int>(ys.size());
  p.seg_begin[0] = 0;
  for (size_t s = 0; s < ys.size(); ++s) {
    p.seg_y[s] = ys[s]->raw();
    p.seg_begin[s + 1] = p.seg_begin[s] + static_cast<int>(ys[s]->size(-1));
  }
  set_weight_params(p, w, m);
  const float* is = w.input_scale.defined() ? w.input_scale.data<float>() : nullptr;
  const bf16* xb = x.data<bf16>();
  auto* ws = static_cast<uint8_t*>(workspace);
  if (f == kW4) {
    const bool gemm = takes_w4_gemm(w, m);
    if (gemm) {
      // The prep kernel zeroes the split-K counters past the prepared x.
      const W4WgmmaPlan plan = w4_plan(w, m);
      void* scratch = ws + round_up(m * kp * 2, 256);
      prepare_w4_activations(p, w, xb, m, ws, stream, true, w4_wgmma_counters(plan, scratch),
                             static_cast<int>(plan.tiles));
      if (y.dtype() == DType::kF32)
        launch_w4_wgmma<float>(p, plan, scratch, stream);
      else
        launch_w4_wgmma<bf16>(p, plan, scratch, stream);
      return;
    }
    prepare_w4_activations(p, w, xb, m, ws, stream);
    // Many rows: W expanded to BF16 once, then one cuBLASLt GEMM (bias in y's dtype there).
    if (takes_lt_route(w, m) && (!bias || bias->dtype() == y.dtype())) {
      auto* wd = reinterpret_cast<bf16*>(ws + round_up(m * kp * 2, 256));
      launch_w4_dequant(p.codes, p.wscale, p.zeros, w.padded_out, kp, p.chunks_per_group, wd,
                        stream);
      const Tensor xt = Tensor::wrap(const_cast<void*>(p.x), {m, kp}, DType::kBF16, nullptr,
                                     Device::kCuda);
      const Tensor wt = Tensor::wrap(wd, {n, kp}, DType::kBF16, nullptr, Device::kCuda);
      linear(blas, xt, wt, bias, y, stream);
      return;
    }
  } else {
    const ActivationCodes codes = activation_codes_for(p, w, m, ws, ready_codes);
    uint8_t* q = codes.q;
    float* sx = codes.sx;
    if (f == kFp8Blk) {
      const int64_t groups = ceil_div(k, w.block_cols);
      p.chunks_per_group = static_cast<int>(w.block_cols / kChunk);
      p.scale_cols = static_cast<int>(groups);
      launch_act_quant_group(xb, m, k, kp, w.block_cols, groups, is, q, sx, stream);
    } else {
      prepare_per_channel_activations(p, f, w, xb, m, codes, ready_codes != nullptr, stream, fold);
    }
    // Beyond decode sizes, FP8 / INT8 per channel go through cuBLASLt (one pass over W at
    // tensor-core rate) when it has an algorithm; FP8's row / column scales are its outer
    // vectors, INT8's are applied to the exact S32 product after.
    if ((f == kFp8Ch || f == kI8Ch) && takes_lt_route(w, m) && lt_takes_output(f, m, y)) {
      void* acc = ws + lt_scratch_offset(m, kp);
      if (f == kFp8Ch && fp8_rowwise_gemm(blas, w.codes.raw(), w.scales.data<float>(), n, kp, q,
                                          sx, m, kp, kp, bias, y, static_cast<float*>(acc),
                                          stream))
        return;
      if (f == kI8Ch && int8_rowwise_gemm(blas, w.codes.raw(), w.scales.data<float>(), n, kp, q,
                                          sx, m, kp, kp, bias, y, static_cast<int32_t*>(acc),
                                          stream))
        return;
    }
  }
  if (y.dtype() == DType::kF32)
    launch_any<float>(f, p, stream);
  else
    launch_any<bf16>(f, p, stream);
}

// KITE_CUDA_QGEMV_GATED=0 sends quantized gated MLPs back to the linear + silu_mul launches.
const bool g_gated_auto = !env_switched_off("KITE_CUDA_QGEMV_GATED");

// At batch 4 the gated form measured 2 % faster (3.520 / 3.516 / 3.514 against 3.626 / 3.572 /
// 3.567 ms; BENCHMARKS.md, run 8). At M <= 2 it was first taken only from 3 rows, because the
// gated GEMV then needed the separate activation-quantization launch (0-1 % slower); it now
// quantizes in-block there too (run 17). KITE_CUDA_QGEMV_GATED_FQ=0 keeps M <= 2 on the linear
// + silu_mul launches (an A/B switch).
const bool g_gated_fq = !env_switched_off("KITE_CUDA_QGEMV_GATED_FQ");
bool quantized_silu_mul_applies(const DeviceQuantizedWeight& w, int64_t m) {
  const Fmt f = fmt_of(w.format);
  // W4: where the decode kernel takes the linear (M <= 8, not forced elsewhere), with whole
  // 16-row tiles in each half.
  if (f == kW4)
    return g_gated_auto && w.out_features % 32 == 0 &&
           ((m <= 8 && !takes_bulk(f, m) && (g_dec_path == 0 || g_dec_path == 2)) ||
            takes_w4_wide_decode(w, m));
  return g_gated_auto && (f == kFp8Ch || f == kI8Ch) && takes_bulk(f, m) &&
         (g_gated_fq || m > kFusedQuantRows) && w.out_features % 16 == 0;
}

void quantized_linear_silu_mul(const Tensor& x, const DeviceQuantizedWeight& w, Tensor& out,
                               void* workspace, size_t workspace_bytes, cudaStream_t stream,
                               const void* ready_codes, const FoldedNorm* fold) {
  constexpr const char* kGatedOp = "quantized_linear_silu_mul";
  check_device(x, DType::kBF16, kGatedOp, "x");
  check_device(out, DType::kBF16, kGatedOp, "out");
  const int64_t k = w.in_features, half = w.out_features / 2;
  KITE_CUDA_OP_CHECK(k > 0 && x.size(-1) == k, kGatedOp, "x's last dim must be in_features");
  const int64_t m = x.numel() / k;
  KITE_CUDA_OP_CHECK(out.numel() == m * half && out.size(-1) == half, kGatedOp,
                     "out must be [M, out_features / 2]");
  KITE_CUDA_OP_CHECK(quantized_silu_mul_applies(w, m), kGatedOp,
                     "needs FP8 / INT8 per-channel weights and at most 16 rows, or INT4 and at "
                     "most 8 (at group 128: 32); out_features a multiple of 16 (INT4: 32; "
                     "quantized_silu_mul_applies)");
  KITE_CUDA_OP_CHECK(!bytes_overlap(x, out), kGatedOp, "out must not alias x");
  KITE_CUDA_OP_CHECK(reinterpret_cast<uintptr_t>(x.raw()) % 16 == 0, kGatedOp,
                     "x must be 16-byte aligned");
  if (m == 0) return;
  check_ready_codes(w, m, ready_codes, kGatedOp);
  Tensor* outs[] = {&out};
  check_folded_norm(fold, w, x, m, ready_codes, outs, kGatedOp);
  const size_t need = quantized_linear_workspace_bytes(w, m);
  KITE_CUDA_OP_CHECK(
      workspace_bytes >= need && workspace, kGatedOp,
      "workspace of " + std::to_string(workspace_bytes) + " bytes, needs " + std::to_string(need));
  const Fmt f = fmt_of(w.format);
  KParams p{};
  set_weight_params(p, w, m);
  p.n = static_cast<int>(half);  // the output features; the up rows start at row n
  p.y = out.raw();
  p.seg_count = 1;
  if (f == kW4) {
    prepare_w4_activations(p, w, x.data<bf16>(), m, workspace, stream);
    return launch_qdec_w4_silu(p, DecodeOverride{g_dec_kw, g_dec_u}, stream);
  }
  const ActivationCodes codes = activation_codes_for(p, w, m, workspace, ready_codes);
  prepare_per_channel_activations(p, f, w, x.data<bf16>(), m, codes, ready_codes != nullptr, stream,
                                  fold);
  if (f == kFp8Ch)
    launch_qgemv_bulk_silu<kFp8Ch>(p, stream);
  else
    launch_qgemv_bulk_silu<kI8Ch>(p, stream);
}

}  // namespace kite::cuda
