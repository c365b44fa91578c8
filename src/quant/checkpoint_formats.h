// Reading quantized linear weights as checkpoints store them.
//
//   AWQ (GEMM layout, AutoAWQ WQLinear_GEMM): `<name>.qweight` I32 [in, out/8], `<name>.qzeros`
//     I32 [in/g, out/8], `<name>.scales` F16 [in/g, out]. Each int32 packs 8 consecutive output
//     columns, nibble i (bits 4i..4i+3) holding column 8c + {0,2,4,6,1,3,5,7}[i]; zeros packed
//     alike. W[n][k] = (q[k][n] - z[k/g][n]) * s[k/g][n]. kite also reads (and
//     `kite quantize` writes) a partial last group: ceil(in/g) rows of qzeros and scales.
//   GPTQ (v1 checkpoint format, AutoGPTQ / GPTQModel): `<name>.qweight` I32 [in/8, out], each
//     int32 packing 8 consecutive input rows (row 8r + j in nibble j); `<name>.qzeros` I32
//     [groups, out/8] packing 8 consecutive columns (nibble j = column 8c + j), storing zero - 1;
//     `<name>.scales` F16 [groups, out]; `<name>.g_idx` I32 [in] (group of each input channel;
//     act-order checkpoints permute it). group_size -1: one group.
//   kite FP8 / INT8 (`kite quantize`, compressed-tensors' per-channel naming): `<name>.weight`
//     F8_E4M3 or I8 [out, in] with `<name>.weight_scale` F32 [out, 1] (or [out]).
//   DeepSeek-V3 FP8 block: `<name>.weight` F8_E4M3 + `<name>.weight_scale_inv` [out/128, in/128];
//     kept as a kFp8Block QuantizedWeight only with --quantization fp8 (else dequantized to fp32
//     by WeightStore::get_f32 as before).
// Any of these may add `<name>.input_smooth_inv` F32 [in]: kite's explicit smoothing factor 1/s
// for a linear whose input is not a norm output (QuantizedWeight::input_scale).
#pragma once

#include <optional>
#include <string>

#include "model/weight_store.h"
#include "quant/quantized_weight.h"

namespace kite {

// The stored quantized form of linear `name` [out, in], or nullopt when the checkpoint holds it
// unquantized (or it is FP8 block and the plan does not keep FP8). Errors name the tensor.
Result<std::optional<QuantizedWeight>> load_checkpoint_linear(const WeightStore& weights,
                                                              const std::string& name, int64_t out,
                                                              int64_t in);

}  // namespace kite
