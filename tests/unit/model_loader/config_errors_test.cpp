// ModelConfig: each invalid config.json yields an error naming the file and the field.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "model/config.h"

namespace kite {
namespace {

using json = nlohmann::json;

json small_llama() {
  return {{"model_type", "llama"},    {"vocab_size", 320},
          {"hidden_size", 64},        {"intermediate_size", 96},
          {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-5}};
}

json small_deepseek(const char* type) {
  json j = small_llama();
  j.update({{"model_type", type},
            {"num_key_value_heads", 4},
            {"kv_lora_rank", 32},
            {"q_lora_rank", nullptr},
            {"qk_nope_head_dim", 16},
            {"qk_rope_head_dim", 8},
            {"v_head_dim", 16},
            {"n_routed_experts", 8},
            {"n_shared_experts", 1},
            {"num_experts_per_tok", 2},
            {"moe_intermediate_size", 24},
            {"first_k_dense_replace", 1},
            {"n_group", 4},
            {"topk_group", 2}});
  return j;
}

struct ErrorCase {
  const char* label;
  std::function<json()> make;
  ErrorCode code;
  std::vector<std::string> substrings;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.label; }

json with(json j, const json& patch) {
  j.update(patch);
  return j;
}
json without(json j, const char* key) {
  j.erase(key);
  return j;
}

const ErrorCase kCases[] = {
    {"unknown_model_type",
     [] {
       return with(small_llama(), {{"model_type", "mistral"}});
     },
     ErrorCode::kUnsupported,
     {"cfg.json", "model_type 'mistral'", "llama, qwen2, deepseek_v2, deepseek_v3"}},
    {"missing_model_type",
     [] { return without(small_llama(), "model_type"); },
     ErrorCode::kInvalidArgument,
     {"cfg.json", "'model_type'"}},
    {"missing_hidden_size",
     [] { return without(small_llama(), "hidden_size"); },
     ErrorCode::kInvalidArgument,
     {"cfg.json", "missing required field 'hidden_size'"}},
    {"null_vocab",
     [] {
       return with(small_llama(), {{"vocab_size", nullptr}});
     },
     ErrorCode::kInvalidArgument,
     {"missing required field 'vocab_size'"}},
    {"string_hidden_size",
     [] {
       return with(small_llama(), {{"hidden_size", "4096"}});
     },
     ErrorCode::kInvalidArgument,
     {"cfg.json", "'hidden_size' must be an integer", "string"}},
    {"fractional_layers",
     [] {
       return with(small_llama(), {{"num_hidden_layers", 2.5}});
     },
     ErrorCode::kInvalidArgument,
     {"'num_hidden_layers' must be an integer"}},
    {"string_eps",
     [] {
       return with(small_llama(), {{"rms_norm_eps", "1e-5"}});
     },
     ErrorCode::kInvalidArgument,
     {"'rms_norm_eps' must be a number"}},
    {"string_bool",
     [] {
       return with(small_llama(), {{"tie_word_embeddings", "yes"}});
     },
     ErrorCode::kInvalidArgument,
     {"'tie_word_embeddings' must be true or false"}},
    {"bad_eos",
     [] {
       return with(small_llama(), {{"eos_token_id", {1, "two"}}});
     },
     ErrorCode::kInvalidArgument,
     {"'eos_token_id' must be an integer or a list"}},
    {"negative_vocab",
     [] {
       return with(small_llama(), {{"vocab_size", -5}});
     },
     ErrorCode::kInvalidArgument,
     {"cfg.json", "'vocab_size' must be positive, got -5"}},
    {"zero_layers",
     [] {
       return with(small_llama(), {{"num_hidden_layers", 0}});
     },
     ErrorCode::kInvalidArgument,
     {"'num_hidden_layers' must be positive"}},
    {"kv_heads_not_divisor",
     [] {
       return with(small_llama(), {{"num_key_value_heads", 3}});
     },
     ErrorCode::kInvalidArgument,
     {"num_attention_heads (4) is not divisible by num_key_value_heads (3)"}},
    {"hidden_not_divisible",
     [] {
       return with(small_llama(), {{"num_attention_heads", 6}});
     },
     ErrorCode::kInvalidArgument,
     {"hidden_size (64) is not divisible by num_attention_heads"}},
    {"gelu",
     [] {
       return with(small_llama(), {{"hidden_act", "gelu"}});
     },
     ErrorCode::kUnsupported,
     {"hidden_act 'gelu'"}},
    {"rope_longrope",
     [] {
       return with(small_llama(), {{"rope_scaling", {{"type", "longrope"}, {"factor", 2}}}});
     },
     ErrorCode::kUnsupported,
     {"rope_scaling.type 'longrope'", "llama3, yarn"}},
    {"rope_no_factor",
     [] {
       return with(small_llama(), {{"rope_scaling", {{"type", "linear"}}}});
     },
     ErrorCode::kInvalidArgument,
     {"'rope_scaling.factor'"}},
    {"rope_no_type",
     [] {
       return with(small_llama(), {{"rope_scaling", {{"factor", 2.0}}}});
     },
     ErrorCode::kInvalidArgument,
     {"'rope_scaling.rope_type'"}},
    {"rope_not_object",
     [] {
       return with(small_llama(), {{"rope_scaling", "yarn"}});
     },
     ErrorCode::kInvalidArgument,
     {"'rope_scaling' must be an object or null"}},
    {"llama3_no_original",
     [] {
       return with(small_llama(), {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8}}}});
     },
     ErrorCode::kInvalidArgument,
     {"'rope_scaling.original_max_position_embeddings'"}},
    {"rope_negative_factor",
     [] {
       return with(small_llama(), {{"rope_scaling", {{"type", "linear"}, {"factor", -1}}}});
     },
     ErrorCode::kInvalidArgument,
     {"'factor' must be positive, got -1"}},
    {"rope_params_bad_theta",
     [] {
       return with(small_llama(), {{"rope_parameters", {{"rope_theta", "big"}}}});
     },
     ErrorCode::kInvalidArgument,
     {"'rope_parameters.rope_theta' must be a number"}},
    {"qwen2_sliding",
     [] {
       return with(small_llama(), {{"model_type", "qwen2"}, {"use_sliding_window", true}});
     },
     ErrorCode::kUnsupported,
     {"use_sliding_window"}},
    {"quant_bitsandbytes",  // awq / gptq / compressed-tensors are read by quant/ (issue #7)
     [] {
       return with(small_llama(),
                   {{"quantization_config", {{"quant_method", "bitsandbytes"}}}});
     },
     ErrorCode::kUnsupported,
     {"quant_method 'bitsandbytes'"}},
    {"fp8_per_tensor",
     [] {
       return with(small_llama(), {{"quantization_config", {{"quant_method", "fp8"}}}});
     },
     ErrorCode::kUnsupported,
     {"without weight_block_size"}},
    {"fp8_e5m2",
     [] {
       return with(
           small_llama(),
           {{"quantization_config",
             {{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}}}});
     },
     ErrorCode::kUnsupported,
     {"fmt 'e5m2'"}},
    {"fp8_bad_block",
     [] {
       return with(small_llama(), {{"quantization_config",
                                    {{"quant_method", "fp8"}, {"weight_block_size", {128, 0}}}}});
     },
     ErrorCode::kInvalidArgument,
     {"weight_block_size[1]' must be positive"}},
    {"deepseek_missing_kv_lora",
     [] { return without(small_deepseek("deepseek_v3"), "kv_lora_rank"); },
     ErrorCode::kInvalidArgument,
     {"missing required field 'kv_lora_rank'"}},
    {"deepseek_odd_rope",
     [] {
       return with(small_deepseek("deepseek_v2"), {{"qk_rope_head_dim", 7}});
     },
     ErrorCode::kInvalidArgument,
     {"'qk_rope_head_dim' must be even"}},
    {"deepseek_zero_q_lora",
     [] {
       return with(small_deepseek("deepseek_v3"), {{"q_lora_rank", 0}});
     },
     ErrorCode::kInvalidArgument,
     {"'q_lora_rank' must be positive"}},
    {"experts_not_divisible_by_group",
     [] {
       return with(small_deepseek("deepseek_v3"), {{"n_group", 3}});
     },
     ErrorCode::kInvalidArgument,
     {"n_routed_experts (8) is not divisible by n_group (3)"}},
    {"topk_exceeds_experts",
     [] {
       return with(small_deepseek("deepseek_v3"), {{"num_experts_per_tok", 9}});
     },
     ErrorCode::kInvalidArgument,
     {"num_experts_per_tok (9) exceeds n_routed_experts (8)"}},
    {"topk_group_exceeds_groups",
     [] {
       return with(small_deepseek("deepseek_v3"), {{"topk_group", 5}});
     },
     ErrorCode::kInvalidArgument,
     {"topk_group (5) exceeds n_group (4)"}},
    {"groups_too_few_experts",
     [] {
       return with(small_deepseek("deepseek_v3"), {{"topk_group", 1}, {"num_experts_per_tok", 3}});
     },
     ErrorCode::kInvalidArgument,
     {"topk_group (1) groups of 2 experts hold fewer than num_experts_per_tok (3)"}},
    {"moe_missing_intermediate",
     [] { return without(small_deepseek("deepseek_v2"), "moe_intermediate_size"); },
     ErrorCode::kInvalidArgument,
     {"missing required field 'moe_intermediate_size'"}},
    {"dense_replace_too_large",
     [] {
       return with(small_deepseek("deepseek_v2"), {{"first_k_dense_replace", 3}});
     },
     ErrorCode::kInvalidArgument,
     {"first_k_dense_replace (3)"}},
    {"bad_scoring",
     [] {
       return with(small_deepseek("deepseek_v3"), {{"scoring_func", "relu"}});
     },
     ErrorCode::kUnsupported,
     {"scoring_func 'relu'", "softmax, sigmoid"}},
    {"bad_topk_method",
     [] {
       return with(small_deepseek("deepseek_v3"), {{"topk_method", "random"}});
     },
     ErrorCode::kUnsupported,
     {"topk_method 'random'"}},
    {"zero_moe_freq",
     [] {
       return with(small_deepseek("deepseek_v2"), {{"moe_layer_freq", 0}});
     },
     ErrorCode::kInvalidArgument,
     {"'moe_layer_freq' must be positive"}},
};

class ModelConfigErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ModelConfigErrors, NamesTheFieldAndFile) {
  const ErrorCase& c = GetParam();
  auto r = parse_model_config(c.make().dump(), "/m/cfg.json");
  ASSERT_FALSE(r.ok()) << c.label << " was accepted";
  EXPECT_EQ(r.status().code(), c.code) << r.status().message();
  EXPECT_NE(r.status().message().find("/m/cfg.json"), std::string::npos) << r.status().message();
  for (const auto& s : c.substrings)
    EXPECT_NE(r.status().message().find(s), std::string::npos)
        << "message '" << r.status().message() << "' lacks '" << s << "'";
}

INSTANTIATE_TEST_SUITE_P(Cases, ModelConfigErrors, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(ModelConfigErrorsText, MalformedJsonAndWrongTopLevel) {
  // 1e999 overflows a double: nlohmann throws out_of_range, not parse_error (found by
  // tests/fuzz/fuzz_safetensors on the same code path; it used to escape as an exception).
  for (const char* text : {"{\"model_type\": \"llama\",", "[1, 2]", "", "nul",
                            "{\"model_type\": \"llama\", \"rope_theta\": 1e999}"}) {
    auto r = parse_model_config(text, "/m/cfg.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("/m/cfg.json"), std::string::npos);
  }
}

TEST(ModelConfigErrorsText, SmallConfigsAreValid) {
  // The bases of the table above must parse, or every case would pass for the wrong reason.
  for (const json& j :
       {small_llama(), small_deepseek("deepseek_v2"), small_deepseek("deepseek_v3")}) {
    auto r = parse_model_config(j.dump(), "/m/cfg.json");
    EXPECT_TRUE(r.ok()) << r.status().message();
  }
}

}  // namespace
}  // namespace kite
