// ModelConfig: everything kite reads from a Hugging Face `config.json`, normalised.
//
// One struct serves all four architectures; fields an architecture does not use keep their
// defaults. Field names follow the Hugging Face config keys so a reader can map them 1:1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace kite {

enum class ModelType { kLlama, kQwen2, kDeepseekV2, kDeepseekV3 };

enum class RopeType { kDefault, kLinear, kLlama3, kYarn, kDynamic };

struct RopeScaling {
  RopeType type = RopeType::kDefault;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn (DeepSeek-V2/V3 style)
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
  std::optional<double> attention_factor;  // explicit override, rarely set
  bool truncate = true;                    // yarn: floor/ceil the correction range
};

struct ModelConfig {
  ModelType model_type = ModelType::kLlama;
  std::string model_type_name;  // as written in config.json
  std::string torch_dtype = "float32";

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  // Defaults to hidden_size / num_attention_heads; for deepseek_v2/v3 (MLA) it defaults to
  // qk_rope_head_dim as in Hugging Face, and MLA code should use the qk_*/v_head_dim fields.
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // qwen2: q/k/v carry a bias (o_proj does not)
  bool mlp_bias = false;
  std::string hidden_act = "silu";
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;

  // MLA (deepseek_v2 / v3)
  std::optional<int64_t> q_lora_rank;  // null: plain q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = true;  // deepseek_v3 config key; v2 always interleaves
  // DeepSeek-V3 multi-token-prediction layers stored after the last decoder layer
  // (model.layers.<num_hidden_layers + i>.*); the main model does not run them.
  int64_t num_nextn_predict_layers = 0;

  // MoE (deepseek_v2 / v3)
  int64_t n_routed_experts = 0;  // 0: dense model
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  double routed_scaling_factor = 1.0;
  std::string scoring_func = "softmax";  // softmax | sigmoid
  std::string topk_method = "greedy";    // greedy | group_limited_greedy | noaux_tc
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = false;

  // FP8 block quantisation of the checkpoint (DeepSeek-V3 `quantization_config`).
  bool fp8_block_quantized = false;
  int64_t fp8_block_rows = 128;
  int64_t fp8_block_cols = 128;

  bool is_mla() const { return kv_lora_rank > 0; }
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // True when layer `layer` uses the MoE block rather than the dense MLP.
  bool is_moe_layer(int64_t layer) const;
};

// Parses config.json text; `source` names the file in error messages.
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source);
Result<ModelConfig> load_model_config(const std::string& model_dir);

}  // namespace kite
