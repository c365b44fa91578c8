// ModelConfig parsing against config.json files modelled on the published configs of
// Llama-3.1-8B, Qwen2.5-7B, DeepSeek-V2-Lite, DeepSeek-V2 and DeepSeek-V3.
#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "safetensors_writer.h"

namespace kite {
namespace {

using json = nlohmann::json;

const char* kLlama31_8B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})";

const char* kQwen25_7B = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
  "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
  "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28,
  "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 131072, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1", "use_cache": true, "use_mrope": false,
  "use_sliding_window": false, "vocab_size": 152064})";

const char* kDeepseekV2Lite = R"({
  "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "aux_loss_alpha": 0.001, "bos_token_id": 100000,
  "eos_token_id": 100001, "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048,
  "initializer_range": 0.02, "intermediate_size": 10944, "kv_lora_rank": 512,
  "max_position_embeddings": 163840, "model_type": "deepseek_v2", "moe_intermediate_size": 1408,
  "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2,
  "norm_topk_prob": false, "num_attention_heads": 16, "num_experts_per_tok": 6,
  "num_hidden_layers": 27, "num_key_value_heads": 16, "pretraining_tp": 1, "q_lora_rank": null,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707,
                   "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
                   "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax",
  "seq_aux": true, "tie_word_embeddings": false, "topk_group": 1, "topk_method": "greedy",
  "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": true,
  "v_head_dim": 128, "vocab_size": 102400})";

const char* kDeepseekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1,
  "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
  "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
  "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
  "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
  "norm_topk_prob": true, "num_attention_heads": 128, "num_experts_per_tok": 8,
  "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                          "weight_block_size": [128, 128]},
  "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                   "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
  "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16", "transformers_version": "4.46.3", "use_cache": true,
  "v_head_dim": 128, "vocab_size": 129280})";

ModelConfig parse_ok(const std::string& text) {
  auto r = parse_model_config(text, "test/config.json");
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : ModelConfig{};
}

TEST(ModelConfig, Llama31_8B) {
  ModelConfig c = parse_ok(kLlama31_8B);
  EXPECT_EQ(c.model_type, ModelType::kLlama);
  EXPECT_EQ(c.model_type_name, "llama");
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_FALSE(c.is_mla());
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_FALSE(c.fp8_block_quantized);
}

TEST(ModelConfig, Qwen25_7BImpliesQkvBias) {
  ModelConfig c = parse_ok(kQwen25_7B);
  EXPECT_EQ(c.model_type, ModelType::kQwen2);
  EXPECT_TRUE(c.attention_bias);  // not written in the config; implied by qwen2
  EXPECT_EQ(c.hidden_size, 3584);
  EXPECT_EQ(c.num_attention_heads, 28);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 18944);
  EXPECT_EQ(c.vocab_size, 152064);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, RopeType::kDefault);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151643}));
  json j = json::parse(kQwen25_7B);
  j["attention_bias"] = false;  // an explicit key wins
  j["tie_word_embeddings"] = true;
  ModelConfig d = parse_ok(j.dump());
  EXPECT_FALSE(d.attention_bias);
  EXPECT_TRUE(d.tie_word_embeddings);
}

TEST(ModelConfig, DeepseekV2LiteYarnGreedyNoQLora) {
  ModelConfig c = parse_ok(kDeepseekV2Lite);
  EXPECT_EQ(c.model_type, ModelType::kDeepseekV2);
  EXPECT_TRUE(c.is_mla());
  EXPECT_FALSE(c.q_lora_rank.has_value());
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.qk_head_dim(), 192);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.head_dim, 64);  // HF: qk_rope_head_dim for MLA
  EXPECT_TRUE(c.rope_interleave);
  EXPECT_EQ(c.rope_scaling.type, RopeType::kYarn);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 40);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale, 0.707);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 0.707);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.n_routed_experts, 64);
  EXPECT_EQ(c.n_shared_experts, 2);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_intermediate_size, 1408);
  EXPECT_EQ(c.topk_method, "greedy");
  EXPECT_EQ(c.scoring_func, "softmax");
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(26));
}

TEST(ModelConfig, DeepseekV2GroupLimitedGreedy) {
  // DeepSeek-V2 (236B): q_lora_rank set, 160 experts in 8 groups, 3 groups kept.
  json j = json::parse(kDeepseekV2Lite);
  j.update({{"hidden_size", 5120},
            {"num_attention_heads", 128},
            {"num_key_value_heads", 128},
            {"q_lora_rank", 1536},
            {"n_routed_experts", 160},
            {"n_group", 8},
            {"topk_group", 3},
            {"topk_method", "group_limited_greedy"},
            {"routed_scaling_factor", 16.0},
            {"num_hidden_layers", 60},
            {"moe_intermediate_size", 1536},
            {"intermediate_size", 12288}});
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.topk_method, "group_limited_greedy");
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 3);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 16.0);
}

TEST(ModelConfig, DeepseekV3NoauxSigmoidFp8) {
  ModelConfig c = parse_ok(kDeepseekV3);
  EXPECT_EQ(c.model_type, ModelType::kDeepseekV3);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.topk_method, "noaux_tc");
  EXPECT_EQ(c.scoring_func, "sigmoid");
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_TRUE(c.rope_interleave);
  EXPECT_TRUE(c.fp8_block_quantized);
  EXPECT_EQ(c.fp8_block_rows, 128);
  EXPECT_EQ(c.fp8_block_cols, 128);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 1.0);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_FALSE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
  EXPECT_TRUE(c.is_moe_layer(60));
}

TEST(ModelConfig, DeepseekDefaultsPerGeneration) {
  json v3 = json::parse(kDeepseekV3);
  for (const char* k : {"scoring_func", "topk_method", "norm_topk_prob"}) v3.erase(k);
  v3["rope_interleave"] = false;
  ModelConfig c3 = parse_ok(v3.dump());
  EXPECT_EQ(c3.scoring_func, "sigmoid");
  EXPECT_EQ(c3.topk_method, "noaux_tc");
  EXPECT_TRUE(c3.norm_topk_prob);
  EXPECT_FALSE(c3.rope_interleave);
  json v2 = json::parse(kDeepseekV2Lite);
  for (const char* k : {"scoring_func", "topk_method", "norm_topk_prob"}) v2.erase(k);
  ModelConfig c2 = parse_ok(v2.dump());
  EXPECT_EQ(c2.scoring_func, "softmax");
  EXPECT_EQ(c2.topk_method, "greedy");
  EXPECT_FALSE(c2.norm_topk_prob);
  v2["topk_method"] = "gready";  // DeepSeek's own default spelling
  EXPECT_EQ(parse_ok(v2.dump()).topk_method, "greedy");
}

TEST(ModelConfig, MoeLayerFrequency) {
  json j = json::parse(kDeepseekV2Lite);
  j["moe_layer_freq"] = 2;
  j["first_k_dense_replace"] = 3;
  ModelConfig c = parse_ok(j.dump());
  std::vector<int64_t> moe;
  for (int64_t l = 0; l < 10; ++l)
    if (c.is_moe_layer(l)) moe.push_back(l);
  EXPECT_EQ(moe, (std::vector<int64_t>{4, 6, 8}));
  j["n_routed_experts"] = 0;
  EXPECT_FALSE(parse_ok(j.dump()).is_moe_layer(4));
}

TEST(ModelConfig, OptionalFieldsTakeHuggingFaceDefaults) {
  json j = json::parse(kLlama31_8B);
  for (const char* k : {"num_key_value_heads", "rope_scaling", "rope_theta", "eos_token_id",
                        "bos_token_id", "rms_norm_eps"})
    j.erase(k);
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_scaling.type, RopeType::kDefault);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_FALSE(c.bos_token_id.has_value());
  j["head_dim"] = 64;  // explicit head_dim need not be hidden/heads
  j["rope_scaling"] = nullptr;
  j["hidden_size"] = 4096.0;  // integral float accepted
  ModelConfig d = parse_ok(j.dump());
  EXPECT_EQ(d.head_dim, 64);
  EXPECT_EQ(d.hidden_size, 4096);
}

TEST(ModelConfig, Transformers5RopeParameters) {
  json j = json::parse(kLlama31_8B);
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                          {"factor", 8.0},           {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  ModelConfig c = parse_ok(j.dump());
  EXPECT_EQ(c.torch_dtype, "float16");
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeType::kLlama3);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1234.5}};
  ModelConfig d = parse_ok(j.dump());
  EXPECT_EQ(d.rope_scaling.type, RopeType::kDefault);
  EXPECT_DOUBLE_EQ(d.rope_theta, 1234.5);
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}};  // Qwen2.5 long context
  ModelConfig e = parse_ok(j.dump());
  EXPECT_EQ(e.rope_scaling.type, RopeType::kYarn);
  EXPECT_EQ(e.rope_scaling.original_max_position_embeddings, 131072);  // HF fallback
  j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(parse_ok(j.dump()).rope_scaling.type, RopeType::kLinear);
  j["rope_parameters"] = {{"type", "dynamic"}, {"factor", 2.0}};
  EXPECT_EQ(parse_ok(j.dump()).rope_scaling.type, RopeType::kDynamic);
}

TEST(ModelConfig, LoadsFromAFolder) {
  test::TempDir dir;
  test::write_file(dir / "config.json", kQwen25_7B);
  auto c = load_model_config(dir.str());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->num_key_value_heads, 4);
  auto missing = load_model_config((dir / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  std::filesystem::remove(dir / "config.json");
  auto no_config = load_model_config(dir.str());
  ASSERT_FALSE(no_config.ok());
  EXPECT_EQ(no_config.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(no_config.status().message().find("config.json"), std::string::npos);
  test::write_file(dir / "config.json", "{\"model_type\": \"mistral\"}");
  auto bad = load_model_config(dir.str());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find((dir / "config.json").string()), std::string::npos);
}

}  // namespace
}  // namespace kite
