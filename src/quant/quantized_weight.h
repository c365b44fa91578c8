// QuantizedWeight: a linear layer's weight [out_features, in_features] stored in a narrow
// format, with what the matmul needs to reproduce the GPU kernels' numerics on the CPU.
//
// Formats (every code tensor is row-major over [out, in] in the checkpoint's orientation):
//   kFp8PerChannel  codes F8_E4M3 [out, in]; scales F32 [out]: W = fp8(code) * scale[n].
//                   Activations are quantized per token (row) dynamically to FP8 E4M3 with
//                   scale amax(row) / 448 (W8A8, as vLLM's per-token dynamic FP8).
//   kFp8Block       codes F8_E4M3 [out, in]; scales F32 [ceil(out/br), ceil(in/bc)] (DeepSeek-V3
//                   `weight_scale_inv`): W = fp8(code) * scale[n/br][k/bc]. Activations are
//                   quantized per token per group of bc input channels (DeepSeek's 1x128).
//   kInt8PerChannel codes I8 [out, in] in [-127, 127]; scales F32 [out]. Activations are
//                   quantized per token to INT8 (symmetric, amax / 127).
//   kInt4Group      codes U8 [out, ceil(in/2)]: two 4-bit values per byte, even k in the low
//                   nibble; scales F32 [out, groups] and zeros U8 [out, groups] (0..15):
//                   W = (q - zero) * scale, group of k = g_idx[k] if g_idx is defined (GPTQ
//                   act-order) else k / group_size. Activations stay in fp32 (W4A16).
//
// `input_scale` (optional, F32 [in]) multiplies every activation channel before the matmul
// (and before activation quantization): SmoothQuant's 1/s, or AWQ's 1/s, where the smoothing
// could not be folded into a preceding norm. The weight codes already include the matching s.
//
// Immutable after construction; shared between Linear copies through shared_ptr<const>.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kite {

enum class QuantFormat : uint8_t { kFp8PerChannel, kFp8Block, kInt8PerChannel, kInt4Group };

std::string_view quant_format_name(QuantFormat format);

struct QuantizedWeight {
  QuantFormat format = QuantFormat::kFp8PerChannel;
  int64_t out_features = 0;
  int64_t in_features = 0;
  int64_t group_size = 128;  // kInt4Group: input channels per group
  int64_t block_rows = 128;  // kFp8Block
  int64_t block_cols = 128;  // kFp8Block (also the activation group)
  Tensor codes;
  Tensor scales;
  Tensor zeros;        // kInt4Group only
  Tensor g_idx;        // kInt4Group, optional I32 [in]
  Tensor input_scale;  // optional F32 [in]

  int64_t num_groups() const;  // kInt4Group: scale columns
  // Checks that every tensor has the shape and dtype its format requires.
  Status validate() const;
  // The weight as fp32 [out, in] (what the codes decode to, without input_scale).
  Tensor dequantize() const;
  // Rows [r0, r1) of the dequantized weight into `out` ((r1 - r0) * in floats).
  void dequantize_rows(int64_t r0, int64_t r1, float* out) const;
  // Bytes the codes, scales and zeros occupy.
  int64_t storage_bytes() const;
};

// Weight quantizers (round to nearest; the input is fp32 [out, in]).
QuantizedWeight quantize_fp8_per_channel(const Tensor& weight);
QuantizedWeight quantize_fp8_block(const Tensor& weight, int64_t block_rows, int64_t block_cols);
QuantizedWeight quantize_int8_per_channel(const Tensor& weight);
// Asymmetric group-wise INT4 (scale = (max - min) / 15, zero = round(-min / scale)), the
// scheme AWQ and GPTQ store. `clip` (optional, [out, groups]) shrinks each group's range
// (AWQ's clipping search) before the scale is computed; null = no clipping.
QuantizedWeight quantize_int4_group(const Tensor& weight, int64_t group_size,
                                    const std::vector<float>* clip = nullptr);
// An INT4 group weight of that geometry to fill: codes zeroed, scales and zeros allocated
// (ceil(in / group_size) groups a row).
QuantizedWeight empty_int4_group(int64_t out, int64_t in, int64_t group_size);

// Stacks several quantized weights of one format and in_features along the output rows (gate
// and up into gate_up). Their group geometry and input_scale must agree.
Result<QuantizedWeight> stack_quantized_rows(const std::vector<QuantizedWeight>& parts);

// Activation fake-quantization as the W8A8 kernels apply it, in place on x [rows, cols]:
// each row (or each group of `group` columns of a row, group = cols for per-token) becomes
// q * scale with q an FP8 E4M3 value (scale amax/448) or an integer in [-127, 127] (amax/127).
void fake_quantize_fp8_rows(float* x, int64_t rows, int64_t cols, int64_t group);
void fake_quantize_int8_rows(float* x, int64_t rows, int64_t cols);

}  // namespace kite
