// Parsing and validation of Hugging Face config.json files into ModelConfig.
//
// Every error names the file and the field, because the usual cause is a checkpoint kite was
// not written for (a new rope type, a renamed key) and the user needs to know which line.
#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kite {
namespace {

using json = nlohmann::json;

constexpr const char* kSupportedTypes = "llama, qwen2, deepseek_v2, deepseek_v3";

// Where a field lives, for messages: the file and the enclosing object ("rope_scaling.").
struct FieldCtx {
  const std::string& source;
  std::string prefix;

  Status type_error(std::string_view key, const char* want, const json& got) const {
    std::string shown = got.dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    return invalid_argument(source + ": field '" + prefix + std::string(key) + "' must be " + want +
                            ", got " + got.type_name() + " " + shown);
  }
  Status missing(std::string_view key) const {
    return invalid_argument(source + ": missing required field '" + prefix + std::string(key) +
                            "'");
  }
  Status bad_value(std::string_view key, const std::string& why) const {
    return invalid_argument(source + ": field '" + prefix + std::string(key) + "' " + why);
  }
};

// Null counts as absent: HF writes `"q_lora_rank": null` for "not used".
const json* find(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Status to_int(const json& v, std::string_view key, const FieldCtx& ctx, int64_t* out) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return ctx.bad_value(key, "is too large");
    *out = static_cast<int64_t>(v.get<uint64_t>());
    return ok_status();
  }
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return ok_status();
  }
  // Some exporters write sizes as 4096.0; accept exact integral floats only.
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      *out = static_cast<int64_t>(d);
      return ok_status();
    }
  }
  return ctx.type_error(key, "an integer", v);
}

// Each reader leaves *out untouched when the key is absent or null.
Status read_int(const json& o, std::string_view key, const FieldCtx& ctx, int64_t* out) {
  const json* v = find(o, key);
  return v ? to_int(*v, key, ctx, out) : ok_status();
}

Status read_required_int(const json& o, std::string_view key, const FieldCtx& ctx, int64_t* out) {
  if (!find(o, key)) return ctx.missing(key);
  return read_int(o, key, ctx, out);
}

Status read_opt_int(const json& o, std::string_view key, const FieldCtx& ctx,
                    std::optional<int64_t>* out) {
  const json* v = find(o, key);
  if (!v) return ok_status();
  int64_t x = 0;
  KITE_RETURN_IF_ERROR(to_int(*v, key, ctx, &x));
  *out = x;
  return ok_status();
}

Status read_double(const json& o, std::string_view key, const FieldCtx& ctx, double* out) {
  const json* v = find(o, key);
  if (!v) return ok_status();
  if (!v->is_number()) return ctx.type_error(key, "a number", *v);
  *out = v->get<double>();
  return ok_status();
}

Status read_bool(const json& o, std::string_view key, const FieldCtx& ctx, bool* out) {
  const json* v = find(o, key);
  if (!v) return ok_status();
  if (!v->is_boolean()) return ctx.type_error(key, "true or false", *v);
  *out = v->get<bool>();
  return ok_status();
}

Status read_string(const json& o, std::string_view key, const FieldCtx& ctx, std::string* out) {
  const json* v = find(o, key);
  if (!v) return ok_status();
  if (!v->is_string()) return ctx.type_error(key, "a string", *v);
  *out = v->get<std::string>();
  return ok_status();
}

// eos_token_id is an int in most configs and a list in Llama 3.1.
Status read_token_ids(const json& o, std::string_view key, const FieldCtx& ctx,
                      std::vector<int64_t>* out) {
  const json* v = find(o, key);
  if (!v) return ok_status();
  out->clear();
  if (!v->is_array()) {
    int64_t id = 0;
    KITE_RETURN_IF_ERROR(to_int(*v, key, ctx, &id));
    out->push_back(id);
    return ok_status();
  }
  for (const json& e : *v) {
    int64_t id = 0;
    if (!e.is_number()) return ctx.type_error(key, "an integer or a list of integers", *v);
    KITE_RETURN_IF_ERROR(to_int(e, key, ctx, &id));
    out->push_back(id);
  }
  return ok_status();
}

Result<RopeType> rope_type_from_name(const std::string& name, const FieldCtx& ctx,
                                     std::string_view key) {
  if (name == "default") return RopeType::kDefault;
  if (name == "linear") return RopeType::kLinear;
  if (name == "llama3") return RopeType::kLlama3;
  if (name == "yarn") return RopeType::kYarn;
  if (name == "dynamic") return RopeType::kDynamic;
  return unsupported(ctx.source + ": " + ctx.prefix + std::string(key) + " '" + name +
                     "' is not supported (supported: default, linear, llama3, yarn, dynamic)");
}

Status read_rope_params(const json& p, const FieldCtx& ctx, RopeScaling* rs) {
  std::string type_key = p.contains("rope_type") ? "rope_type" : "type";
  std::string type_name;
  KITE_RETURN_IF_ERROR(read_string(p, type_key, ctx, &type_name));
  if (type_name.empty()) return ctx.missing("rope_type");
  KITE_ASSIGN_OR_RETURN(rs->type, rope_type_from_name(type_name, ctx, type_key));
  if (rs->type != RopeType::kDefault && !find(p, "factor")) return ctx.missing("factor");
  KITE_RETURN_IF_ERROR(read_double(p, "factor", ctx, &rs->factor));
  KITE_RETURN_IF_ERROR(read_double(p, "low_freq_factor", ctx, &rs->low_freq_factor));
  KITE_RETURN_IF_ERROR(read_double(p, "high_freq_factor", ctx, &rs->high_freq_factor));
  KITE_RETURN_IF_ERROR(
      read_int(p, "original_max_position_embeddings", ctx, &rs->original_max_position_embeddings));
  KITE_RETURN_IF_ERROR(read_double(p, "beta_fast", ctx, &rs->beta_fast));
  KITE_RETURN_IF_ERROR(read_double(p, "beta_slow", ctx, &rs->beta_slow));
  KITE_RETURN_IF_ERROR(read_double(p, "mscale", ctx, &rs->mscale));
  KITE_RETURN_IF_ERROR(read_double(p, "mscale_all_dim", ctx, &rs->mscale_all_dim));
  KITE_RETURN_IF_ERROR(read_bool(p, "truncate", ctx, &rs->truncate));
  if (const json* v = find(p, "attention_factor")) {
    if (!v->is_number()) return ctx.type_error("attention_factor", "a number", *v);
    rs->attention_factor = v->get<double>();
  }
  if (rs->type == RopeType::kLlama3 && rs->original_max_position_embeddings <= 0)
    return ctx.missing("original_max_position_embeddings");
  return ok_status();
}

// transformers <= 4 writes rope_theta + rope_scaling; transformers 5 writes rope_parameters
// {rope_type, rope_theta, ...}. The newer key wins when both are present.
Status read_rope(const json& root, const std::string& source, ModelConfig* cfg) {
  FieldCtx top{source, ""};
  KITE_RETURN_IF_ERROR(read_double(root, "rope_theta", top, &cfg->rope_theta));
  const char* key = find(root, "rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json* p = find(root, key);
  if (!p) return ok_status();
  if (!p->is_object()) return top.type_error(key, "an object or null", *p);
  FieldCtx ctx{source, std::string(key) + "."};
  if (std::string_view(key) == "rope_parameters") {
    KITE_RETURN_IF_ERROR(read_double(*p, "rope_theta", ctx, &cfg->rope_theta));
    if (!p->contains("rope_type") && !p->contains("type")) return ok_status();
  }
  return read_rope_params(*p, ctx, &cfg->rope_scaling);
}

Status read_common(const json& root, const FieldCtx& ctx, ModelConfig* cfg) {
  KITE_RETURN_IF_ERROR(read_required_int(root, "vocab_size", ctx, &cfg->vocab_size));
  KITE_RETURN_IF_ERROR(read_required_int(root, "hidden_size", ctx, &cfg->hidden_size));
  KITE_RETURN_IF_ERROR(read_required_int(root, "intermediate_size", ctx, &cfg->intermediate_size));
  KITE_RETURN_IF_ERROR(read_required_int(root, "num_hidden_layers", ctx, &cfg->num_hidden_layers));
  KITE_RETURN_IF_ERROR(
      read_required_int(root, "num_attention_heads", ctx, &cfg->num_attention_heads));
  KITE_RETURN_IF_ERROR(
      read_required_int(root, "max_position_embeddings", ctx, &cfg->max_position_embeddings));
  cfg->num_key_value_heads = cfg->num_attention_heads;
  KITE_RETURN_IF_ERROR(read_int(root, "num_key_value_heads", ctx, &cfg->num_key_value_heads));
  KITE_RETURN_IF_ERROR(read_int(root, "head_dim", ctx, &cfg->head_dim));
  KITE_RETURN_IF_ERROR(read_double(root, "rms_norm_eps", ctx, &cfg->rms_norm_eps));
  KITE_RETURN_IF_ERROR(read_bool(root, "tie_word_embeddings", ctx, &cfg->tie_word_embeddings));
  // qwen2 has q/k/v biases without saying so; an explicit key still wins.
  cfg->attention_bias = cfg->model_type == ModelType::kQwen2;
  KITE_RETURN_IF_ERROR(read_bool(root, "attention_bias", ctx, &cfg->attention_bias));
  KITE_RETURN_IF_ERROR(read_bool(root, "mlp_bias", ctx, &cfg->mlp_bias));
  KITE_RETURN_IF_ERROR(read_string(root, "hidden_act", ctx, &cfg->hidden_act));
  // transformers 5 renamed torch_dtype to dtype.
  KITE_RETURN_IF_ERROR(read_string(root, "torch_dtype", ctx, &cfg->torch_dtype));
  KITE_RETURN_IF_ERROR(read_string(root, "dtype", ctx, &cfg->torch_dtype));
  KITE_RETURN_IF_ERROR(read_opt_int(root, "bos_token_id", ctx, &cfg->bos_token_id));
  KITE_RETURN_IF_ERROR(read_token_ids(root, "eos_token_id", ctx, &cfg->eos_token_ids));
  if (cfg->model_type == ModelType::kQwen2) {
    bool sliding = false;
    KITE_RETURN_IF_ERROR(read_bool(root, "use_sliding_window", ctx, &sliding));
    if (sliding)
      return unsupported(ctx.source +
                         ": use_sliding_window=true is not supported (kite runs "
                         "full attention on every layer)");
  }
  return ok_status();
}

Status read_deepseek(const json& root, const FieldCtx& ctx, ModelConfig* cfg) {
  const bool v3 = cfg->model_type == ModelType::kDeepseekV3;
  // Hugging Face defaults differ between the two generations.
  cfg->scoring_func = v3 ? "sigmoid" : "softmax";
  cfg->topk_method = v3 ? "noaux_tc" : "greedy";
  cfg->norm_topk_prob = v3;
  KITE_RETURN_IF_ERROR(read_opt_int(root, "q_lora_rank", ctx, &cfg->q_lora_rank));
  KITE_RETURN_IF_ERROR(read_required_int(root, "kv_lora_rank", ctx, &cfg->kv_lora_rank));
  KITE_RETURN_IF_ERROR(read_required_int(root, "qk_nope_head_dim", ctx, &cfg->qk_nope_head_dim));
  KITE_RETURN_IF_ERROR(read_required_int(root, "qk_rope_head_dim", ctx, &cfg->qk_rope_head_dim));
  KITE_RETURN_IF_ERROR(read_required_int(root, "v_head_dim", ctx, &cfg->v_head_dim));
  if (v3) KITE_RETURN_IF_ERROR(read_bool(root, "rope_interleave", ctx, &cfg->rope_interleave));
  KITE_RETURN_IF_ERROR(
      read_int(root, "num_nextn_predict_layers", ctx, &cfg->num_nextn_predict_layers));

  KITE_RETURN_IF_ERROR(read_int(root, "n_routed_experts", ctx, &cfg->n_routed_experts));
  KITE_RETURN_IF_ERROR(read_int(root, "n_shared_experts", ctx, &cfg->n_shared_experts));
  if (cfg->n_routed_experts > 0) {
    KITE_RETURN_IF_ERROR(
        read_required_int(root, "num_experts_per_tok", ctx, &cfg->num_experts_per_tok));
    KITE_RETURN_IF_ERROR(
        read_required_int(root, "moe_intermediate_size", ctx, &cfg->moe_intermediate_size));
  }
  KITE_RETURN_IF_ERROR(read_int(root, "first_k_dense_replace", ctx, &cfg->first_k_dense_replace));
  KITE_RETURN_IF_ERROR(read_int(root, "moe_layer_freq", ctx, &cfg->moe_layer_freq));
  KITE_RETURN_IF_ERROR(
      read_double(root, "routed_scaling_factor", ctx, &cfg->routed_scaling_factor));
  KITE_RETURN_IF_ERROR(read_string(root, "scoring_func", ctx, &cfg->scoring_func));
  KITE_RETURN_IF_ERROR(read_string(root, "topk_method", ctx, &cfg->topk_method));
  // DeepSeek's own DeepseekV2Config defaulted to the misspelling "gready".
  if (cfg->topk_method == "gready") cfg->topk_method = "greedy";
  KITE_RETURN_IF_ERROR(read_int(root, "n_group", ctx, &cfg->n_group));
  KITE_RETURN_IF_ERROR(read_int(root, "topk_group", ctx, &cfg->topk_group));
  KITE_RETURN_IF_ERROR(read_bool(root, "norm_topk_prob", ctx, &cfg->norm_topk_prob));
  // MLA rotates only the rope part of each head; HF sets head_dim to that width.
  if (!find(root, "head_dim")) cfg->head_dim = cfg->qk_rope_head_dim;
  return ok_status();
}

Status read_quantization(const json& root, const std::string& source, ModelConfig* cfg) {
  const json* q = find(root, "quantization_config");
  if (!q) return ok_status();
  FieldCtx top{source, ""};
  if (!q->is_object()) return top.type_error("quantization_config", "an object or null", *q);
  FieldCtx ctx{source, "quantization_config."};
  std::string method, fmt = "e4m3";
  KITE_RETURN_IF_ERROR(read_string(*q, "quant_method", ctx, &method));
  if (method.empty()) return ctx.missing("quant_method");
  // INT4 / kite checkpoints: read by quant/checkpoint_formats (quant/quant_plan.h).
  if (method == "awq" || method == "gptq" || method == "compressed-tensors") return ok_status();
  if (method != "fp8")
    return unsupported(source + ": quantization_config.quant_method '" + method +
                       "' is not supported (supported: fp8 with weight_block_size, awq, gptq, "
                       "compressed-tensors)");
  KITE_RETURN_IF_ERROR(read_string(*q, "fmt", ctx, &fmt));
  if (fmt != "e4m3")
    return unsupported(source + ": quantization_config.fmt '" + fmt +
                       "' is not supported (supported: e4m3)");
  const json* block = find(*q, "weight_block_size");
  if (!block)
    return unsupported(source +
                       ": fp8 quantization without weight_block_size (per-tensor "
                       "scales) is not supported");
  if (!block->is_array() || block->size() != 2)
    return ctx.type_error("weight_block_size", "a list of two integers", *block);
  KITE_RETURN_IF_ERROR(to_int((*block)[0], "weight_block_size", ctx, &cfg->fp8_block_rows));
  KITE_RETURN_IF_ERROR(to_int((*block)[1], "weight_block_size", ctx, &cfg->fp8_block_cols));
  cfg->fp8_block_quantized = true;
  return ok_status();
}

Status require_positive(const std::string& source, const char* field, int64_t value) {
  if (value > 0) return ok_status();
  return invalid_argument(source + ": field '" + field + "' must be positive, got " +
                          std::to_string(value));
}

Status validate_rope(const ModelConfig& c, const std::string& src) {
  if (!(c.rope_theta > 0)) return invalid_argument(src + ": field 'rope_theta' must be positive");
  const RopeScaling& rs = c.rope_scaling;
  if (!(rs.factor > 0))
    return invalid_argument(src + ": rope scaling 'factor' must be positive, got " +
                            json(rs.factor).dump());
  if (rs.type == RopeType::kLlama3 && !(rs.high_freq_factor > rs.low_freq_factor))
    return invalid_argument(src +
                            ": llama3 rope scaling needs high_freq_factor > "
                            "low_freq_factor (they are the ends of a ramp)");
  if (rs.type == RopeType::kYarn && !(rs.beta_fast > rs.beta_slow))
    return invalid_argument(src + ": yarn rope scaling needs beta_fast > beta_slow");
  return ok_status();
}

Status validate_moe(const ModelConfig& c, const std::string& src) {
  if (c.n_routed_experts < 0 || c.n_shared_experts < 0)
    return invalid_argument(src + ": n_routed_experts and n_shared_experts must be >= 0");
  if (c.n_routed_experts == 0) return ok_status();
  KITE_RETURN_IF_ERROR(require_positive(src, "moe_intermediate_size", c.moe_intermediate_size));
  KITE_RETURN_IF_ERROR(require_positive(src, "num_experts_per_tok", c.num_experts_per_tok));
  KITE_RETURN_IF_ERROR(require_positive(src, "moe_layer_freq", c.moe_layer_freq));
  KITE_RETURN_IF_ERROR(require_positive(src, "n_group", c.n_group));
  KITE_RETURN_IF_ERROR(require_positive(src, "topk_group", c.topk_group));
  auto bad = [&](const std::string& why) { return invalid_argument(src + ": " + why); };
  if (c.num_experts_per_tok > c.n_routed_experts)
    return bad("num_experts_per_tok (" + std::to_string(c.num_experts_per_tok) +
               ") exceeds n_routed_experts (" + std::to_string(c.n_routed_experts) + ")");
  if (c.n_routed_experts % c.n_group != 0)
    return bad("n_routed_experts (" + std::to_string(c.n_routed_experts) +
               ") is not divisible by n_group (" + std::to_string(c.n_group) + ")");
  if (c.topk_group > c.n_group)
    return bad("topk_group (" + std::to_string(c.topk_group) + ") exceeds n_group (" +
               std::to_string(c.n_group) + ")");
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.num_hidden_layers)
    return bad("first_k_dense_replace (" + std::to_string(c.first_k_dense_replace) +
               ") must be in [0, num_hidden_layers]");
  if (c.scoring_func != "softmax" && c.scoring_func != "sigmoid")
    return unsupported(src + ": scoring_func '" + c.scoring_func +
                       "' is not supported (supported: softmax, sigmoid)");
  if (c.topk_method != "greedy" && c.topk_method != "group_limited_greedy" &&
      c.topk_method != "noaux_tc")
    return unsupported(src + ": topk_method '" + c.topk_method +
                       "' is not supported (supported: greedy, group_limited_greedy, noaux_tc)");
  // Group-limited routing keeps topk_group groups; they must hold at least top_k experts.
  if (c.topk_method != "greedy" &&
      c.topk_group * (c.n_routed_experts / c.n_group) < c.num_experts_per_tok)
    return bad("topk_group (" + std::to_string(c.topk_group) + ") groups of " +
               std::to_string(c.n_routed_experts / c.n_group) +
               " experts hold fewer than num_experts_per_tok (" +
               std::to_string(c.num_experts_per_tok) + ")");
  return ok_status();
}

Status validate_mla(const ModelConfig& c, const std::string& src) {
  KITE_RETURN_IF_ERROR(require_positive(src, "kv_lora_rank", c.kv_lora_rank));
  KITE_RETURN_IF_ERROR(require_positive(src, "qk_nope_head_dim", c.qk_nope_head_dim));
  KITE_RETURN_IF_ERROR(require_positive(src, "qk_rope_head_dim", c.qk_rope_head_dim));
  KITE_RETURN_IF_ERROR(require_positive(src, "v_head_dim", c.v_head_dim));
  if (c.q_lora_rank) KITE_RETURN_IF_ERROR(require_positive(src, "q_lora_rank", *c.q_lora_rank));
  if (c.qk_rope_head_dim % 2 != 0)
    return invalid_argument(src + ": field 'qk_rope_head_dim' must be even (rope rotates pairs)");
  if (c.num_nextn_predict_layers < 0)
    return invalid_argument(src + ": field 'num_nextn_predict_layers' must be >= 0");
  return ok_status();
}

Status validate(const ModelConfig& c, const std::string& src) {
  KITE_RETURN_IF_ERROR(require_positive(src, "vocab_size", c.vocab_size));
  KITE_RETURN_IF_ERROR(require_positive(src, "hidden_size", c.hidden_size));
  KITE_RETURN_IF_ERROR(require_positive(src, "intermediate_size", c.intermediate_size));
  KITE_RETURN_IF_ERROR(require_positive(src, "num_hidden_layers", c.num_hidden_layers));
  KITE_RETURN_IF_ERROR(require_positive(src, "num_attention_heads", c.num_attention_heads));
  KITE_RETURN_IF_ERROR(require_positive(src, "num_key_value_heads", c.num_key_value_heads));
  KITE_RETURN_IF_ERROR(require_positive(src, "head_dim", c.head_dim));
  KITE_RETURN_IF_ERROR(require_positive(src, "max_position_embeddings", c.max_position_embeddings));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return invalid_argument(src + ": num_attention_heads (" +
                            std::to_string(c.num_attention_heads) +
                            ") is not divisible by num_key_value_heads (" +
                            std::to_string(c.num_key_value_heads) + ")");
  if (!c.is_mla() && c.head_dim % 2 != 0)
    return invalid_argument(src + ": field 'head_dim' must be even (rope rotates pairs)");
  if (!(c.rms_norm_eps > 0)) return invalid_argument(src + ": field 'rms_norm_eps' must be > 0");
  if (c.hidden_act != "silu" && c.hidden_act != "swish")
    return unsupported(src + ": hidden_act '" + c.hidden_act +
                       "' is not supported (supported: "
                       "silu)");
  KITE_RETURN_IF_ERROR(validate_rope(c, src));
  if (c.model_type == ModelType::kDeepseekV2 || c.model_type == ModelType::kDeepseekV3) {
    KITE_RETURN_IF_ERROR(validate_mla(c, src));
    KITE_RETURN_IF_ERROR(validate_moe(c, src));
  }
  if (c.fp8_block_quantized) {
    KITE_RETURN_IF_ERROR(
        require_positive(src, "quantization_config.weight_block_size[0]", c.fp8_block_rows));
    KITE_RETURN_IF_ERROR(
        require_positive(src, "quantization_config.weight_block_size[1]", c.fp8_block_cols));
  }
  return ok_status();
}

Result<ModelType> model_type_from_name(const std::string& name, const std::string& source) {
  if (name == "llama") return ModelType::kLlama;
  if (name == "qwen2") return ModelType::kQwen2;
  if (name == "deepseek_v2") return ModelType::kDeepseekV2;
  if (name == "deepseek_v3") return ModelType::kDeepseekV3;
  return unsupported(source + ": model_type '" + name +
                     "' is not supported (supported: " + kSupportedTypes + ")");
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (n_routed_experts <= 0 || layer < first_k_dense_replace) return false;
  return moe_layer_freq > 0 && layer % moe_layer_freq == 0;
}

Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range (1e999)
    return invalid_argument(source + ": malformed JSON: " + e.what());
  }
  if (!root.is_object())
    return invalid_argument(source + ": expected a JSON object at the top level, got " +
                            root.type_name());
  FieldCtx ctx{source, ""};
  ModelConfig cfg;
  KITE_RETURN_IF_ERROR(read_string(root, "model_type", ctx, &cfg.model_type_name));
  if (cfg.model_type_name.empty()) return ctx.missing("model_type");
  KITE_ASSIGN_OR_RETURN(cfg.model_type, model_type_from_name(cfg.model_type_name, source));
  KITE_RETURN_IF_ERROR(read_common(root, ctx, &cfg));
  const bool deepseek =
      cfg.model_type == ModelType::kDeepseekV2 || cfg.model_type == ModelType::kDeepseekV3;
  if (deepseek) {
    KITE_RETURN_IF_ERROR(read_deepseek(root, ctx, &cfg));
  } else if (cfg.head_dim == 0 && cfg.num_attention_heads > 0) {
    if (cfg.hidden_size % cfg.num_attention_heads != 0)
      return invalid_argument(source + ": hidden_size (" + std::to_string(cfg.hidden_size) +
                              ") is not divisible by num_attention_heads (" +
                              std::to_string(cfg.num_attention_heads) +
                              ") and head_dim is not given");
    cfg.head_dim = cfg.hidden_size / cfg.num_attention_heads;
  }
  KITE_RETURN_IF_ERROR(read_rope(root, source, &cfg));
  // HF yarn falls back to max_position_embeddings when the original length is not written.
  if (cfg.rope_scaling.type == RopeType::kYarn &&
      cfg.rope_scaling.original_max_position_embeddings <= 0)
    cfg.rope_scaling.original_max_position_embeddings = cfg.max_position_embeddings;
  KITE_RETURN_IF_ERROR(read_quantization(root, source, &cfg));
  KITE_RETURN_IF_ERROR(validate(cfg, source));
  return cfg;
}

Result<ModelConfig> load_model_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec))
    return not_found("model directory '" + model_dir + "' does not exist or is not a directory");
  fs::path path = fs::path(model_dir) / "config.json";
  if (!fs::is_regular_file(path, ec))
    return not_found("'" + path.string() +
                     "' not found (a Hugging Face checkpoint folder has "
                     "a config.json)");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return not_found("could not read '" + path.string() + "'");
  return parse_model_config(text.str(), path.string());
}

}  // namespace kite
