// Parameter counting from config.json agrees with the tensors of every fixture checkpoint,
// and the per-token decode bytes count only the activated experts.
#include "bench/weight_bytes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "model/weight_store.h"

namespace kite::bench {
namespace {

std::string fixture(const std::string& name) {
  return std::string(KITE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

// Parameters the loaders read: every stored tensor but FP8 scales and DeepSeek-V3's MTP layers.
int64_t stored_params(const std::string& dir, const ModelConfig& c) {
  auto store = WeightStore::open(dir);
  EXPECT_TRUE(store.ok()) << store.status().message();
  const std::regex layer(R"(model\.layers\.(\d+)\..*)");
  int64_t n = 0;
  for (const auto& name : store->names()) {
    if (name.size() > 10 && name.compare(name.size() - 10, 10, "_scale_inv") == 0) continue;
    std::smatch m;
    if (std::regex_match(name, m, layer) && std::stoll(m[1]) >= c.num_hidden_layers) continue;
    n += shape_numel(store->info(name)->shape);
  }
  return n;
}

class ParamCount : public ::testing::TestWithParam<std::string> {};

TEST_P(ParamCount, MatchesCheckpointTensors) {
  auto config = load_model_config(fixture(GetParam()));
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(count_params(*config).total, stored_params(fixture(GetParam()), *config));
}

INSTANTIATE_TEST_SUITE_P(Bench, ParamCount,
                         ::testing::Values("llama3", "qwen2", "deepseek_v2", "deepseek_v3"));

TEST(BenchDecodeWeightBytes, KiteTinyCountsTopKExperts) {
  auto c = load_model_config(std::string(KITE_SOURCE_DIR) + "/models/kite-tiny");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(count_params(*c).total,
            stored_params(std::string(KITE_SOURCE_DIR) + "/models/kite-tiny", *c));
  const ParamCounts p = count_params(*c);
  // Dense share + hidden (one embedding row) + top-2 of 8 experts in the 5 MoE layers.
  const double want = 4.0 * (p.lm_head + p.norms + p.attention + p.dense_mlp + p.moe_router +
                             p.moe_shared + c->hidden_size + 2 * p.routed_expert * 5);
  EXPECT_EQ(p.num_moe_layers, 5);
  EXPECT_DOUBLE_EQ(decode_weight_bytes_per_step(*c, 1), want);
  // Larger batches touch more experts, never more than all of them.
  const double b8 = decode_weight_bytes_per_step(*c, 8),
               b1000 = decode_weight_bytes_per_step(*c, 1000);
  EXPECT_GT(b8, want);
  EXPECT_LE(b1000, 4.0 * (p.total + p.lm_head - p.embedding + 1000 * c->hidden_size) + 1);
}

TEST(BenchDecodeWeightBytes, DenseModelReadsEverythingButTheEmbeddingTable) {
  auto c = load_model_config(fixture("llama3"));
  ASSERT_TRUE(c.ok());
  const ParamCounts p = count_params(*c);
  EXPECT_DOUBLE_EQ(decode_weight_bytes_per_step(*c, 1),
                   4.0 * (p.total - p.embedding + c->hidden_size));
  EXPECT_DOUBLE_EQ(decode_weight_bytes_per_step(*c, 4),
                   4.0 * (p.total - p.embedding + 4 * c->hidden_size));
}

// The published shapes under tools/bench/configs (no weights): totals as their model cards state.
TEST(BenchDecodeWeightBytes, PublishedConfigs) {
  const std::string root = std::string(KITE_SOURCE_DIR) + "/tools/bench/configs/";
  auto llama = load_model_config(root + "llama3_8b");
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  EXPECT_EQ(count_params(*llama).total, 8030261248);  // Llama-3(.1)-8B
  auto qwen = load_model_config(root + "qwen2_5_0_5b");
  ASSERT_TRUE(qwen.ok()) << qwen.status().message();
  EXPECT_EQ(count_params(*qwen).total, 494032768);  // Qwen2.5-0.5B (tied embeddings, qkv bias)
  auto lite = load_model_config(root + "deepseek_v2_lite");
  ASSERT_TRUE(lite.ok()) << lite.status().message();
  const ParamCounts p = count_params(*lite);
  EXPECT_NEAR(p.total / 1e9, 15.7, 0.05);  // "15.7B total parameters"
  // "2.4B activated": per-token weights without the embedding table.
  EXPECT_NEAR(decode_weight_bytes_per_step(*lite, 1) / 4 / 1e9, 2.4, 0.25);
}

// --quantization: the linears it covers at their stored size, lm_head only when quantized too,
// norms and embedding rows at the compute dtype's size.
TEST(BenchDecodeWeightBytes, QuantizedLinearsCountAtTheirStoredSize) {
  auto c = load_model_config(fixture("llama3"));
  ASSERT_TRUE(c.ok());
  const ParamCounts p = count_params(*c);
  EXPECT_EQ(p.attention_unquantized, 0);
  const WeightBytes int4 = weight_bytes_for(QuantMethod::kInt4, QuantMethod::kNone, 2);
  EXPECT_DOUBLE_EQ(int4.linear, 0.5 + 5.0 / 128);
  EXPECT_DOUBLE_EQ(decode_weight_bytes_per_step(*c, 1, int4),
                   int4.linear * static_cast<double>(p.attention + p.dense_mlp) +
                       2.0 * static_cast<double>(p.lm_head + p.norms + c->hidden_size));
  EXPECT_DOUBLE_EQ(weight_bytes_for(QuantMethod::kAwq, QuantMethod::kNone, 2).linear, int4.linear);
  const WeightBytes fp8_head = weight_bytes_for(QuantMethod::kFp8, QuantMethod::kFp8, 2);
  EXPECT_DOUBLE_EQ(decode_weight_bytes_per_step(*c, 1, fp8_head),
                   1.0 * static_cast<double>(p.attention + p.dense_mlp + p.lm_head) +
                       2.0 * static_cast<double>(p.norms + c->hidden_size));
  EXPECT_DOUBLE_EQ(decode_weight_bytes_per_step(
                       *c, 3, weight_bytes_for(QuantMethod::kNone, QuantMethod::kNone, 2)),
                   decode_weight_bytes_per_step(*c, 3, 2));
  // --lm-head-quantization int8 under int4 linears: lm_head at one byte, the linears at INT4's.
  const WeightBytes int4_int8_head = weight_bytes_for(QuantMethod::kInt4, QuantMethod::kInt8, 2);
  EXPECT_DOUBLE_EQ(int4_int8_head.linear, int4.linear);
  EXPECT_DOUBLE_EQ(decode_weight_bytes_per_step(*c, 1, int4_int8_head),
                   int4.linear * static_cast<double>(p.attention + p.dense_mlp) +
                       1.0 * static_cast<double>(p.lm_head) +
                       2.0 * static_cast<double>(p.norms + c->hidden_size));
}

// The reports' label names what each part is stored in.
TEST(BenchDecodeWeightBytes, LabelNamesTheLinearsAndLmHeadFormats) {
  QuantOptions q;
  EXPECT_EQ(weight_dtype_label(q, "bf16"), "bf16");
  q.method = QuantMethod::kInt4;
  EXPECT_EQ(weight_dtype_label(q, "bf16"), "int4 linears, bf16");
  q.quantize_lm_head = true;
  EXPECT_EQ(weight_dtype_label(q, "bf16"), "int4 linears and lm_head, bf16");
  q.lm_head_method = QuantMethod::kInt8;
  EXPECT_EQ(weight_dtype_label(q, "bf16"), "int4 linears, int8 lm_head, bf16");
  q.method = QuantMethod::kAwq;
  q.lm_head_method = QuantMethod::kNone;
  EXPECT_EQ(weight_dtype_label(q, "bf16"), "awq linears, int4 lm_head, bf16");
  q.method = QuantMethod::kNone;
  q.quantize_lm_head = false;
  q.lm_head_method = QuantMethod::kFp8;
  EXPECT_EQ(weight_dtype_label(q, "bf16"), "fp8 lm_head, bf16");
}

// MLA's kv_b_proj and its q_a / kv_a norms stay unquantized: the count of them agrees with the
// DeepSeek fixtures' tensors.
TEST(BenchDecodeWeightBytes, MlaKvBProjAndNormsStayUnquantized) {
  for (const std::string name : {"deepseek_v2", "deepseek_v3"}) {
    SCOPED_TRACE(name);
    auto c = load_model_config(fixture(name));
    ASSERT_TRUE(c.ok());
    auto store = WeightStore::open(fixture(name));
    ASSERT_TRUE(store.ok());
    const std::regex plain(R"(model\.layers\.(\d+)\.self_attn\.(kv_b_proj|q_a_layernorm|kv_a_layernorm)\.weight)");
    int64_t n = 0;
    for (const auto& t : store->names()) {
      std::smatch m;
      if (std::regex_match(t, m, plain) && std::stoll(m[1]) < c->num_hidden_layers)
        n += shape_numel(store->info(t)->shape);
    }
    const ParamCounts p = count_params(*c);
    EXPECT_GT(n, 0);
    EXPECT_EQ(p.attention_unquantized, n);
    const double all_fp8 = decode_weight_bytes_per_step(*c, 1, WeightBytes{1, 1, 1});
    EXPECT_DOUBLE_EQ(decode_weight_bytes_per_step(
                         *c, 1, weight_bytes_for(QuantMethod::kFp8, QuantMethod::kFp8, 2)),
                     all_fp8 + static_cast<double>(p.norms + p.attention_unquantized +
                                                   p.moe_router + c->hidden_size));
  }
}

}  // namespace
}  // namespace kite::bench
