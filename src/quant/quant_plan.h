// QuantPlan: what load_model does to each linear weight while it loads — quantize it on load
// (--quantization), apply SmoothQuant / AWQ smoothing factors found by calibration, keep a
// DeepSeek FP8 block checkpoint in FP8 — and how to read a quantized checkpoint (AWQ, GPTQ,
// kite's own FP8 / INT8 exports).
//
// Linear keys: a linear is named by its checkpoint prefix ("model.layers.3.self_attn.o_proj");
// gate and up, stacked into one GEMM, are named by the gate's prefix.
//
// Which linears are quantized: every attention, MLP, shared- and routed-expert projection
// loaded through Linear (q/q_a/q_b/kv_a/o, q/k/v, gate/up/down). Not quantized: embeddings,
// norms, lm_head, the MoE router gate (`mlp.gate`, a tiny GEMM whose errors flip expert
// choices) and MLA's kv_b_proj, which is split at load into the per-head absorbed matrices.
//
// Smoothing (SmoothQuant, AWQ): the layer computes (x / s) · (W diag(s))^T. Where x is the
// output of an RMSNorm (q/k/v, q_a, kv_a: input_layernorm; q_b: q_a_layernorm; gate/up and the
// router: post_attention_layernorm) the division is folded into the norm weight, as SmoothQuant
// does, and every consumer of that norm multiplies its weight columns by s (the unquantized
// router too, so it computes exactly what it did). Elsewhere (o_proj, down_proj) 1/s stays an
// explicit per-channel QuantizedWeight::input_scale.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "quant/quant_method.h"
#include "quant/quantized_weight.h"

namespace kite {

// A quantized checkpoint's `quantization_config`, as config.json declares it.
enum class CheckpointQuant : uint8_t { kNone, kAwq, kGptq, kKiteFp8, kKiteInt8 };
struct CheckpointQuantConfig {
  CheckpointQuant kind = CheckpointQuant::kNone;
  int64_t bits = 4;
  int64_t group_size = 128;  // -1 in GPTQ means one group over all input channels
  bool desc_act = false;     // GPTQ act-order (g_idx)
  bool zero_point = true;    // AWQ asymmetric
};
// Reads `quantization_config` from config.json text: awq (version gemm), gptq (v1), and
// compressed-tensors per-channel 8-bit float / int (kite quantize's fp8 / int8 exports: kind
// kKiteFp8 / kKiteInt8). Absent or DeepSeek fp8-block: kind kNone.
Result<CheckpointQuantConfig> parse_checkpoint_quant(const std::string& config_json,
                                                     const std::string& source);

struct Smoothing {
  std::vector<float> s;  // [in] per input channel
  bool folded = false;   // true: the preceding norm was divided by s; false: input_scale = 1/s
};

struct QuantPlan {
  QuantMethod method = QuantMethod::kNone;
  int64_t group_size = 128;          // int4 / awq
  CheckpointQuantConfig checkpoint;  // how the files store quantized weights
  bool keep_fp8_block = false;       // DeepSeek FP8 block weights stay FP8 (--quantization fp8)
  int64_t fp8_block_rows = 128, fp8_block_cols = 128;
  std::map<std::string, Smoothing> smoothing;               // linear key -> s
  std::map<std::string, std::vector<float>> norm_divisors;  // norm weight name -> s
  std::map<std::string, std::vector<float>> int4_clip;      // linear key -> [out, groups]
  // Calibration only (AWQ searches in the model's order on the activations of a model whose
  // earlier linears are already quantized): linears of decoder layers >= this stay fp32 unless
  // the plan already holds their clipping bounds (searched).
  int64_t quantize_layers_below = INT64_MAX;
  // --quantize-lm-head / --lm-head-quantization: lm_head is quantized too, in the plain form of
  // lm_head_method (no smoothing, no clipping search; for a tied model, the quantized copy
  // beside the embedding); kNone leaves it unquantized.
  QuantMethod lm_head_method = QuantMethod::kNone;
  bool quantize_lm_head() const { return lm_head_method != QuantMethod::kNone; }

  // True for the linears on-load quantization applies to (see the file comment).
  static bool is_quantizable(std::string_view key);
  // The method a linear is quantized with where the plan quantizes it: lm_head's own, or
  // `method`.
  QuantMethod method_of(std::string_view key) const {
    return key == "lm_head" ? lm_head_method : method;
  }
  // Whether on-load quantization applies to this linear: a method for it (method_of) and a
  // linear it covers (is_quantizable, or lm_head).
  bool quantizes(std::string_view key) const {
    return method_of(key) != QuantMethod::kNone && (is_quantizable(key) || key == "lm_head");
  }
  // Whether plan_linear changes this linear's weight at all: quantizes it or smooths it.
  bool changes(const std::string& key) const { return quantizes(key) || smoothing.count(key); }
  // The norm weight whose output is this linear's input, or nullopt (o_proj, down_proj).
  static std::optional<std::string> input_norm_of(std::string_view key);
  // The decoder layer index of a "model.layers.N." key, or -1.
  static int64_t layer_of(std::string_view key);
  // The norm weight applied to (the first channels of) this linear's output, or nullopt: MLA's
  // q_a_proj -> q_a_layernorm, kv_a_proj_with_mqa -> kv_a_layernorm (its latent part).
  static std::optional<std::string> output_norm_of(std::string_view key);
};

// Applies the plan to one freshly loaded fp32 linear weight [out, in] named `key`: scales its
// columns by the smoothing factors (in place: `weight` is the loader's own copy) and, when
// the method and key
// call for it, returns its quantized form; nullopt keeps `weight` in fp32.
Result<std::optional<QuantizedWeight>> plan_linear(const QuantPlan& plan, const std::string& key,
                                                   Tensor& weight);

}  // namespace kite

namespace kite {

struct ModelConfig;

// The plan for loading `model_dir` with `quant` (--quantization and --quantize-lm-head), before
// calibration: reads the checkpoint's quantization_config, keeps FP8 block weights FP8 for
// method fp8, and refuses to quantize an already quantized (AWQ / GPTQ / kite) checkpoint again.
Result<std::shared_ptr<QuantPlan>> make_base_plan(const std::string& model_dir,
                                                  const ModelConfig& config,
                                                  const QuantOptions& quant);

}  // namespace kite
