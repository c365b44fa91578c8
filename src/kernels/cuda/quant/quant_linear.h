// Quantized linear layers on the GPU (issue 7): y[M, N] = act(x · diag(input_scale)) · W^T
// (+ bias) for the four QuantizedWeight formats, numerically the op ops::quantized_linear
// (kernels/quant_ops.h) computes on the CPU.
//
// One tensor-core kernel family serves every M (decode and prefill): the weight is the MMA's
// A operand (16 output features per tile), the tokens its B operand (8 per tile; "swap AB", so a
// decode step wastes 7 of 8 token columns rather than 15 of 16), K is split over the warps of a
// block and reduced through shared memory; no atomics, deterministic.
//   kInt4Group      W4A16: mma.sync m16n8k16 BF16; the 4-bit codes are turned into exact
//                   BF16 integers (q - zero) in registers (magic-exponent trick: one LOP3
//                   and one bf16x2 subtraction per pair, quant_kernel.cuh), the group scale
//                   is applied in fp32 to each 64-channel chunk's partial sum, so the only
//                   rounding beyond fp32 summation is x itself in BF16.
//   kFp8PerChannel  W8A8: x quantized per token to FP8 E4M3 (amax / 448, the reference's exact
//                   rounding), mma.sync m16n8k32 E4M3 x E4M3 -> fp32, row x column scales after.
//   kInt8PerChannel W8A8: x quantized per token to INT8 (amax / 127, round half even),
//                   mma.sync m16n8k32 S8 x S8 -> S32 (exact), row x column scales after.
//   kFp8Block       W8A8 with DeepSeek-V3 128x128 weight blocks and 1x128 activation groups:
//                   the m16n8k32 E4M3 kernel, fp32 partial sums scaled per 64-channel chunk by
//                   weight-block scale x activation-group scale.
// Decode (M <= 8): kFp8PerChannel and kInt8PerChannel by default take the bulk-copy GEMV
// (quant_gemv_bulk.cu: a persistent block per SM, a producer thread streaming the codes into a
// shared-memory ring with cp.async.bulk, 16 consumer warps on the same MMAs and fragment
// orders; from 9 to 16 rows with 2 token tiles of 8 per weight tile, on activation codes
// quantized by a kernel before or, FP8 on smaller weights, BF16 x); kInt4Group and kFp8Block take
// qdec_kernel (faster for W4A16 than the bulk GEMV on the H200), which streams the same layouts
// GEMV-style: one 16-row tile per block, K split over up to 16 warps (one wave of the grid), each
// warp a contiguous run of chunks with 4 (FP8 block: 2) chunks' code loads in flight in a register
// ring, same MMAs and fragment orders (identical numerics), programmatic dependent launch. W4A16 at
// group 128 (an even chunk count) stays on it from 9 to 32 rows (set_w4_decode_rows): token tiles
// of 8 over one stream of the weight, past 24 rows only on weights the wgmma GEMM below does not
// fill the SMs with (not the stacked gate_up). W4A16 from 9 to 128 rows, where the decode kernel
// does not take it, takes a GEMM on Hopper's warpgroup MMA (quant_w4_wgmma.cu) where it measured
// faster (w4_wgmma_wins: the stacked gate_up from 9 rows, q/k/v and long weights (down) from 33,
// every weight from 65; K split on long weights): each warp dequantizes its 16-row tile into wgmma
// A registers with the same w4_frag, and the tensor cores read x from a swizzled shared-memory tile
// (x prepared in the codes' k order by launch_w4_prep), instead of every 32-row block and warp
// reading x through L1; the rest stays on the tensor-core kernel, whose warps split K. Tokens are
// tiled 64 per block (grid.y over larger M); each block re-streams its weight rows, so a large
// prefill would read the weight M/64 times. Hence the large-M routes through cuBLASLt: FP8 / INT8
// per channel above 16 rows (fp8_gemm_lt.h: FP8 x FP8 with outer-vector scales; S8 x S8 -> S32,
// then the scales), W4A16 above 128 rows (w4_dequant.h: W expanded to BF16, then a BF16 GEMM; each
// weight rounded to BF16 there). FP8 block stays on the kernel.
//
// Device layouts (DeviceQuantizedWeight), N_pad = round_up(N, 64), K_pad = round_up(K, 64):
//   kInt4Group      codes U8 [N_pad/16, K_pad/64, 32 lanes, 16 bytes]: each 16-row x 64-channel
//                   tile is 512 bytes, lane (g = lane/4, t = lane%4) holding its MMA fragments
//                   (rows g and g+8, channels 16t..16t+15 of the chunk) so a warp loads a tile
//                   with one coalesced 16-byte load per lane. scales F32 [groups, N_pad],
//                   zeros U8 [groups, N_pad]. GPTQ act-order (g_idx) is resolved at upload: the
//                   input channels are sorted by group (`perm`, I32 [K]: packed channel j reads
//                   x column perm[j]) and x is gathered through perm before the kernel.
//   kFp8PerChannel  codes F8_E4M3 [N_pad, K_pad] row-major (zero padded), scales F32 [N_pad].
//   kInt8PerChannel codes I8 [N_pad, K_pad], scales F32 [N_pad].
//   kFp8Block       codes F8_E4M3 [N_pad, K_pad], scales F32 [ceil(N/br), ceil(K/bc)] as in
//                   the checkpoint (br, bc multiples of 64).
// Inside a 16/32-channel MMA step the channels are assigned to fragment slots in a permuted
// order, the same for both operands, which leaves the dot product unchanged and lets each lane
// read its activation slice with 16-byte loads.
//
// Activation scratch (quantized x and its scales, or the gathered/scaled BF16 x of W4A16) lives
// in a caller-provided device workspace of quantized_linear_workspace_bytes() bytes: no
// allocation and no host synchronisation per call, so quantized_linear() can be captured in a
// CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/blaslt.h"
#include "kernels/folded_norm.h"
#include "quant/quantized_weight.h"

namespace kite::cuda {

struct DeviceQuantizedWeight {
  QuantFormat format = QuantFormat::kInt4Group;
  int64_t out_features = 0;  // N
  int64_t in_features = 0;   // K
  int64_t padded_out = 0;    // N_pad
  int64_t padded_in = 0;     // K_pad
  int64_t group_size = 0;    // kInt4Group: channels per group (a multiple of 64, or >= K)
  int64_t groups = 0;        // kInt4Group: scale rows
  int64_t block_rows = 128;  // kFp8Block
  int64_t block_cols = 128;  // kFp8Block
  Tensor codes;              // device, layout above
  Tensor scales;             // device F32
  Tensor zeros;              // device U8, kInt4Group only
  Tensor perm;               // device I32 [K], kInt4Group act-order only
  Tensor input_scale;        // device F32 [K], optional

  // Device bytes of codes, scales and zeros (what a GEMV streams).
  int64_t storage_bytes() const;
};

// Host QuantizedWeight -> device (validates it, repacks INT4, resolves act order). Waits for
// the copies, so `w` may be freed on return. Throws std::invalid_argument for geometry the
// kernels do not take (INT4 groups not a multiple of 64 channels; a g_idx whose groups are not
// group_size channels each once sorted; FP8 blocks not multiples of 64).
DeviceQuantizedWeight upload_quantized(const QuantizedWeight& w, cudaStream_t stream);

// A weight of the given format and shape with random codes and plausible scales, generated on
// the GPU (benchmarks and `--load-format dummy`: no host quantization). kInt4Group uses groups
// of 128 with zeros; kFp8Block 128x128 blocks. Deterministic in `seed`.
DeviceQuantizedWeight dummy_quantized(QuantFormat format, int64_t out_features, int64_t in_features,
                                      uint64_t seed, cudaStream_t stream);

// Device workspace bytes quantized_linear() needs for `m` rows of x (0 when none).
size_t quantized_linear_workspace_bytes(const DeviceQuantizedWeight& w, int64_t m);

// y[M, N] = act(x · diag(input_scale)) · W^T (+ bias). x BF16 [.., K] on the device (16-byte
// aligned); y BF16 or F32 [.., N]; bias (optional) F32 or BF16 [N]. `workspace` holds at least
// quantized_linear_workspace_bytes(w, M) bytes (256-byte aligned), used only by work queued on
// `stream`. `blas` serves the large-M cuBLASLt routes. Throws
// std::invalid_argument on a shape/dtype mismatch or a short workspace. Capturable in a graph.
// `ready_codes`: x's activation codes made ahead by the kernel that wrote x (add_rms_norm with
// the NormActivationCodes of norm_activation_codes), where quantized_linear_reads_activation_codes
// says M rows read codes; the linear then makes none itself.
// `fold`: see quantized_linear_folds_norm below.
void quantized_linear(BlasLtContext& blas, const Tensor& x, const DeviceQuantizedWeight& w,
                      const Tensor* bias, Tensor& y, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream, const void* ready_codes = nullptr,
                      const FoldedNorm* fold = nullptr);
// `fold` (kernels/folded_norm.h): a residual-add + RMSNorm folded into this linear, x being
// the norm's input; its values are add_rms_norm's then the linear's, bit for bit where K <= 4,096
// (cuda_ops.h's norm then sums as the GEMV's blocks do). No norm launch, and no dependency hop
// between it and the GEMV: its blocks each normalise the rows and store a share of
// residual_out, which must not overlap residual, x or the outputs.
// Whether M rows of w can take a folded norm: FP8 / INT8 per channel where the bulk GEMV
// quantizes x in-block (M <= 2, no BF16 activations) and K <= 16,384.
bool quantized_linear_takes_folded_norm(const DeviceQuantizedWeight& w, int64_t m);
// Whether the decoder stack should fold it there (the CUDA backend's folds_norm): at one row
// (two measured no faster). KITE_CUDA_FOLD_NORM=0 turns it off (an A/B switch).
bool quantized_linear_folds_norm(const DeviceQuantizedWeight& w, int64_t m);
// Launches so far that took a folded norm (tests: that a model's decode step folds its norms).
int64_t folded_norm_launches();
// Whether M rows of w read per-token activation codes made by a kernel before the GEMV / GEMM
// (FP8 / INT8 per channel, K a multiple of 8, where the bulk GEMV neither quantizes them in every
// block, M <= 2, nor reads BF16 x): codes that can be made ahead and handed in (ready_codes),
// sparing that launch. At M <= 2 codes made by the norm measured slower than the in-block
// quantization (Llama-3-8B FP8 h8 batch 1 0.9 %, INT8 1.2 %; BENCHMARKS.md run 35).
bool quantized_linear_reads_activation_codes(const DeviceQuantizedWeight& w, int64_t m);
// Their buffer for M rows (codes [M, K_pad], then the scales [M]; 256-byte aligned) and the
// norm's view of it (cuda_ops.h).
size_t activation_codes_bytes(const DeviceQuantizedWeight& w, int64_t m);
NormActivationCodes norm_activation_codes(const DeviceQuantizedWeight& w, int64_t m, void* buffer);
// The bytes of codes the norm before M rows of w makes for them (the CUDA backend's
// norm_activation_codes_bytes): activation_codes_bytes where the linear reads codes, else 0.
// Llama-3-8B INT8 h8 decode 2.7 % faster at batch 4 (BENCHMARKS.md run 35).
// KITE_CUDA_NORM_CODES=0 makes it 0 (an A/B switch: the linears quantize x themselves).
size_t norm_codes_bytes(const DeviceQuantizedWeight& w, int64_t m);
// A tensor of codes made ahead as the kernels take them (null stays null); throws (for `op`)
// unless it holds activation_codes_bytes(w, m).
void* ready_codes(const Tensor* codes, const DeviceQuantizedWeight& w, int64_t m,
                  const char* op = "quantized_linear");
// Whether quantized_linear computes M rows of w from the BF16 activations as they are (W8A16:
// FP8 per channel on the bulk GEMV from two to eight rows, and to sixteen on weights of at most
// 64 Mi elements, K whole 64-channel chunks, no input_scale; KITE_CUDA_FP8_DECODE_A16=0 turns
// it off, KITE_CUDA_FP8_A16_ROWS=8 past eight rows) rather than from per-token activation
// codes (W8A8). Its results then differ from ops::quantized_linear's by the activation codes'
// rounding, which it does not have.
bool quantized_linear_reads_bf16_activations(const DeviceQuantizedWeight& w, int64_t m);
// Whether M rows of w go through cuBLASLt: FP8 / INT8 per channel past 16 rows (fp8_gemm_lt.h,
// where it has an algorithm for the shape), INT4 past 128 (expanded to BF16 first).
bool takes_lt_route(const DeviceQuantizedWeight& w, int64_t m);
// The same with the output features split into consecutive parts, each written to its own
// [M, width_s] tensor (one dtype, 1 to 4 parts): q, k and v of one stacked weight, no copies.
// Applies (quantized_split_applies) except on the cuBLASLt routes (takes_lt_route).
bool quantized_split_applies(const DeviceQuantizedWeight& w, int64_t m, size_t outputs);
void quantized_linear_split(BlasLtContext& blas, const Tensor& x, const DeviceQuantizedWeight& w,
                            const Tensor* bias, std::span<Tensor* const> ys, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream,
                            const void* ready_codes = nullptr, const FoldedNorm* fold = nullptr);

// out [M, I] BF16 = silu(x · Wg^T) * (x · Wu^T) for a gated MLP's stacked quantized [gate; up]
// weight [2I, K], in one launch (no bias). Applies (quantized_silu_mul_applies) to FP8 / INT8
// per channel on the bulk GEMV (M <= 16, set_quant_bulk_rows) with I % 8 == 0 (at M <= 2
// quantizing the activations in-block; FP8 from two rows reading them as BF16 where
// quantized_linear_reads_bf16_activations says so), and
// to INT4 on the decode kernel with I % 16 == 0 at M <= 8 and where its lean form takes the
// linear past that (to 32 rows);
// KITE_CUDA_QGEMV_GATED=0 turns it off, KITE_CUDA_QGEMV_GATED_FQ=0 only FP8 / INT8 at M <= 2.
// The workspace is quantized_linear_workspace_bytes(w, M).
bool quantized_silu_mul_applies(const DeviceQuantizedWeight& w, int64_t m);
void quantized_linear_silu_mul(const Tensor& x, const DeviceQuantizedWeight& w, Tensor& out,
                               void* workspace, size_t workspace_bytes, cudaStream_t stream,
                               const void* ready_codes = nullptr, const FoldedNorm* fold = nullptr);

// Benchmark/test hook, not for serving (not thread-safe): path 0 = automatic (M <= 8 takes the
// bulk-copy GEMV for the per-channel formats, the decode kernel for kInt4Group and kFp8Block;
// KITE_CUDA_QGEMV_BULK=0 gives the per-channel formats back to the tensor-core kernel),
// 1 = M <= 8 always on the tensor-core kernel, 2 = always on the decode kernel, 3 = on the
// bulk GEMV (the decode kernel for kFp8Block; FP8 / INT8 per channel up to set_quant_bulk_rows
// rows, the rest up to 8), which at M <= 2 quantizes FP8 / INT8
// activations itself (KITE_CUDA_QGEMV_FUSED_QUANT=0: a separate kernel does), 4 = as 3 but
// always with the separate activation kernel, 5 = as 3 but FP8 per channel reads its BF16
// activations there instead (W8A16, where K is whole 64-channel chunks and no input_scale
// applies: what automatic mode does from two rows, KITE_CUDA_FP8_DECODE_A16=0 aside); kw > 0
// forces the decode kernel's warps per 16-row tile (at most 16), u = 2 or 4 its chunks in flight
// per warp (0: 4, FP8 block 2).
void set_quant_decode_override(int path, int kw = 0, int u = 0);

// W4A16 past decode sizes (9 to 128 rows): -1 always the tensor-core kernel (qmma_kernel), 0
// automatic (the wgmma GEMM where it measured faster), 1 the wgmma GEMM at any width and any M
// above 8 (benchmarks, tests), 2 the wgmma GEMM at any width from 9 to 128 rows.
void set_w4_gemm_override(int mode);
// The wgmma GEMM's tokens per block (16, 32, 64), warpgroups per block (1, 2) and ranges K is
// split into (1 none; at most the chunks), 0 choosing.
void set_w4_wgmma_shape(int nt, int wg, int splits = 0);
// W4A16 on the decode kernel's lean form (group 128, an even chunk count) up to this many rows
// (8 to 32, token tiles of 8; default 32, KITE_CUDA_W4_DECODE_WIDE=0: 8), past them the GEMMs.
void set_w4_decode_rows(int rows);
// Per-channel FP8 / INT8 on the bulk GEMV up to this many rows (8 to 16; default 16,
// KITE_CUDA_QBULK_ROWS): from 9 rows with two token tiles a weight tile, on activations quantized
// by a kernel before (W8A8) or, FP8 on smaller weights, on BF16 x (W8A16), instead of the
// tensor-core kernel.
void set_quant_bulk_rows(int rows);

}  // namespace kite::cuda
