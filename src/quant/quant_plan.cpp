#include "quant/quant_plan.h"

#include <nlohmann/json.hpp>

namespace kite {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "model.layers.3.mlp.experts.5.gate_proj" -> "model.layers.3." (empty if not a layer key).
std::string layer_prefix(std::string_view key) {
  const std::string_view head = "model.layers.";
  if (key.substr(0, head.size()) != head) return {};
  const size_t dot = key.find('.', head.size());
  return dot == std::string_view::npos ? std::string() : std::string(key.substr(0, dot + 1));
}

}  // namespace

bool QuantPlan::is_quantizable(std::string_view key) {
  if (layer_prefix(key).empty()) return false;  // embeddings, lm_head
  if (ends_with(key, ".mlp.gate") || ends_with(key, "kv_b_proj")) return false;
  for (std::string_view p : {"q_proj", "k_proj", "v_proj", "o_proj", "q_a_proj", "q_b_proj",
                             "kv_a_proj_with_mqa", "gate_proj", "up_proj", "down_proj"})
    if (ends_with(key, std::string(".") + std::string(p))) return true;
  return false;
}

std::optional<std::string> QuantPlan::input_norm_of(std::string_view key) {
  const std::string layer = layer_prefix(key);
  if (layer.empty()) return std::nullopt;
  for (std::string_view p : {".self_attn.q_proj", ".self_attn.k_proj", ".self_attn.v_proj",
                             ".self_attn.q_a_proj", ".self_attn.kv_a_proj_with_mqa"})
    if (ends_with(key, p)) return layer + "input_layernorm.weight";
  if (ends_with(key, ".self_attn.q_b_proj")) return layer + "self_attn.q_a_layernorm.weight";
  if (ends_with(key, ".mlp.gate") || ends_with(key, "gate_proj") || ends_with(key, "up_proj"))
    return layer + "post_attention_layernorm.weight";
  return std::nullopt;
}

int64_t QuantPlan::layer_of(std::string_view key) {
  const std::string layer = layer_prefix(key);
  if (layer.empty()) return -1;
  return std::stoll(layer.substr(std::string_view("model.layers.").size()));
}

std::optional<std::string> QuantPlan::output_norm_of(std::string_view key) {
  const std::string layer = layer_prefix(key);
  if (layer.empty()) return std::nullopt;
  if (ends_with(key, ".self_attn.q_a_proj")) return layer + "self_attn.q_a_layernorm.weight";
  if (ends_with(key, ".self_attn.kv_a_proj_with_mqa"))
    return layer + "self_attn.kv_a_layernorm.weight";
  return std::nullopt;
}

Result<std::optional<QuantizedWeight>> plan_linear(const QuantPlan& plan, const std::string& key,
                                                   Tensor& weight) {
  const int64_t n = weight.size(0), k = weight.size(1);
  const Smoothing* smooth = nullptr;
  if (auto it = plan.smoothing.find(key); it != plan.smoothing.end()) {
    smooth = &it->second;
    if (static_cast<int64_t>(smooth->s.size()) != k)
      return internal_error("smoothing factors for '" + key + "' have the wrong length");
    float* w = weight.data<float>();
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < k; ++i) w[r * k + i] *= smooth->s[i];
  }
  if (!plan.quantizes(key) ||
      (QuantPlan::layer_of(key) >= plan.quantize_layers_below && !plan.int4_clip.count(key)))
    return std::optional<QuantizedWeight>();
  QuantizedWeight q;
  switch (plan.method_of(key)) {
    case QuantMethod::kFp8:
      q = quantize_fp8_per_channel(weight);
      break;
    case QuantMethod::kInt8:
      q = quantize_int8_per_channel(weight);
      break;
    case QuantMethod::kInt4:
    case QuantMethod::kAwq: {
      auto clip = plan.int4_clip.find(key);
      q = quantize_int4_group(weight, plan.group_size,
                              clip == plan.int4_clip.end() ? nullptr : &clip->second);
      break;
    }
    case QuantMethod::kNone:
      break;
  }
  if (smooth && !smooth->folded) {
    q.input_scale = Tensor::empty({k});
    for (int64_t i = 0; i < k; ++i) q.input_scale.f32()[i] = 1.0f / smooth->s[i];
  }
  return std::optional<QuantizedWeight>(std::move(q));
}

Result<CheckpointQuantConfig> parse_checkpoint_quant(const std::string& text,
                                                     const std::string& source) {
  CheckpointQuantConfig c;
  nlohmann::json root = nlohmann::json::parse(text, nullptr, false);
  if (root.is_discarded() || !root.is_object()) return corrupt(source + ": not a JSON object");
  auto q = root.find("quantization_config");
  if (q == root.end() || q->is_null()) return c;
  if (!q->is_object()) return corrupt(source + ": quantization_config must be an object");
  const std::string method = q->value("quant_method", "");
  auto get_int = [&](const char* key, int64_t def) -> Result<int64_t> {
    auto it = q->find(key);
    if (it == q->end() || it->is_null()) return def;
    if (!it->is_number_integer())
      return corrupt(source + ": quantization_config." + key + " must be an integer");
    return it->get<int64_t>();
  };
  if (method == "awq" || method == "gptq") {
    c.kind = method == "awq" ? CheckpointQuant::kAwq : CheckpointQuant::kGptq;
    KITE_ASSIGN_OR_RETURN(c.bits,
                          get_int(method == "awq" && q->contains("w_bit") ? "w_bit" : "bits", 4));
    KITE_ASSIGN_OR_RETURN(
        c.group_size, get_int(q->contains("q_group_size") ? "q_group_size" : "group_size", 128));
    c.desc_act = q->value("desc_act", false);
    c.zero_point = q->value("zero_point", true);
    if (c.bits != 4)
      return unsupported(source + ": " + method + " with " + std::to_string(c.bits) +
                         " bits is not supported (only 4-bit)");
    if (c.kind == CheckpointQuant::kAwq) {
      const std::string version = q->value("version", "gemm");
      if (version != "gemm" && version != "GEMM")
        return unsupported(source + ": AWQ version '" + version + "' is not supported (gemm only)");
      if (!c.zero_point) return unsupported(source + ": AWQ without zero points is not supported");
    } else if (q->value("checkpoint_format", "gptq") != "gptq") {
      return unsupported(source + ": GPTQ checkpoint_format '" + q->value("checkpoint_format", "") +
                         "' is not supported (gptq v1 only)");
    }
    if (c.group_size != -1 && c.group_size <= 0)
      return corrupt(source + ": quantization_config group_size must be positive or -1");
  } else if (method == "compressed-tensors") {
    // Per-channel W8A8 as `kite quantize` writes it: one config group whose weights are
    // 8-bit float (fp8) or int (int8) with strategy "channel".
    auto groups = q->find("config_groups");
    if (groups == q->end() || !groups->is_object() || groups->size() != 1)
      return unsupported(source + ": compressed-tensors needs exactly one config_groups entry");
    const nlohmann::json& weights = groups->begin()->value("weights", nlohmann::json::object());
    const std::string type = weights.value("type", "");
    if (weights.value("num_bits", 0) != 8 || weights.value("strategy", "") != "channel" ||
        (type != "float" && type != "int"))
      return unsupported(source +
                         ": compressed-tensors supported only with 8-bit float or int "
                         "weights of strategy channel");
    c.kind = type == "float" ? CheckpointQuant::kKiteFp8 : CheckpointQuant::kKiteInt8;
    c.bits = 8;
  }
  return c;
}

}  // namespace kite

#include <fstream>
#include <sstream>

#include "model/config.h"

namespace kite {

Result<std::shared_ptr<QuantPlan>> make_base_plan(const std::string& model_dir,
                                                  const ModelConfig& config,
                                                  const QuantOptions& quant) {
  const QuantMethod method = quant.method;
  if (quant.quantize_lm_head && method == QuantMethod::kNone &&
      quant.lm_head_method == QuantMethod::kNone)
    return invalid_argument(
        "--quantize-lm-head needs --quantization (fp8, int8, int4 or awq) or "
        "--lm-head-quantization");
  if (quant.lm_head_method == QuantMethod::kAwq)
    return invalid_argument(
        "--lm-head-quantization awq is not supported (lm_head takes a plain form: fp8, int8 or "
        "int4)");
  auto plan = std::make_shared<QuantPlan>();
  plan->method = method;
  plan->lm_head_method = quant.lm_head_quant();
  const std::string path = model_dir + "/config.json";
  std::ifstream in(path);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    KITE_ASSIGN_OR_RETURN(plan->checkpoint, parse_checkpoint_quant(text.str(), path));
  }
  if (plan->checkpoint.kind != CheckpointQuant::kNone && method != QuantMethod::kNone)
    return invalid_argument(model_dir +
                            " is already a quantized checkpoint; load it without --quantization " +
                            std::string(quant_method_name(method)));
  if (plan->checkpoint.kind != CheckpointQuant::kNone && plan->quantize_lm_head())
    return invalid_argument(model_dir +
                            " is already a quantized checkpoint; its lm_head is loaded as stored "
                            "(drop --quantize-lm-head / --lm-head-quantization)");
  if (config.fp8_block_quantized && method == QuantMethod::kFp8) {
    plan->keep_fp8_block = true;
    plan->fp8_block_rows = config.fp8_block_rows;
    plan->fp8_block_cols = config.fp8_block_cols;
  }
  return plan;
}

}  // namespace kite
