// `kite quantize`: writes a checkpoint quantized by a QuantPlan that load_model reads back to
// the same weights on-load quantization produces.
//
// Layout written to out_dir/model.safetensors (one file) + config.json + tokenizer files (out_dir
// new, empty or an earlier output, built beside it and renamed into place: quant/output_folder.h):
//   int4 / awq: AWQ GEMM layout (quant/checkpoint_formats.h; scales F16) and
//     quantization_config {quant_method awq, bits 4, group_size, zero_point, version gemm}.
//   fp8 / int8: compressed-tensors naming, `<name>.weight` F8_E4M3 / I8 [out, in] +
//     `<name>.weight_scale` F32 [out, 1], quantization_config {quant_method
//     compressed-tensors, format float-quantized / int-quantized, one config group: weights
//     8-bit channel symmetric static, input_activations 8-bit token dynamic}.
//   Smoothing (int8, awq): norms folded (their weights written divided by s, F32), the router
//     written with its columns scaled (F32), and `<name>.input_smooth_inv` F32 [in] for the
//     linears whose smoothing is explicit (o_proj, down_proj) — a kite extension other loaders
//     do not read.
//   Everything else is copied byte for byte.
#pragma once

#include <array>
#include <string>

#include "quant/quant_plan.h"

namespace kite {

// The files a checkpoint's folder gets: the two written, then those copied from the model's
// folder where it has them (quant/output_folder.cpp knows an earlier output by them).
inline constexpr std::array<const char*, 2> kExportWrittenFiles = {"model.safetensors",
                                                                   "config.json"};
inline constexpr std::array<const char*, 3> kExportCopiedFiles = {
    "tokenizer.json", "tokenizer_config.json", "generation_config.json"};

Status export_quantized_checkpoint(const std::string& model_dir, const QuantPlan& plan,
                                   const std::string& out_dir);

}  // namespace kite
