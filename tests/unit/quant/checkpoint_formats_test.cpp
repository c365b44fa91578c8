// Quantized checkpoint layouts: AWQ / GPTQ fixtures (tools/fixtures/make_quant_fixtures.py)
// decode to the float weights the script computed; DeepSeek FP8 blocks stay FP8 when asked.
#include "kernels/cpu/cpu_backend.h"
#include "quant/checkpoint_formats.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "../model_loader/safetensors_writer.h"
#include "model/layers/linear.h"
#include "quant/quant_plan.h"

namespace kite {
namespace {

const std::string kFixtures = std::string(KITE_SOURCE_DIR) + "/tests/fixtures/quant/";

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void expect_fixture_decodes(const std::string& folder, bool expect_g_idx) {
  const std::string dir = kFixtures + folder;
  auto ckpt = parse_checkpoint_quant(read(dir + "/config.json"), dir + "/config.json");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  auto plan = std::make_shared<QuantPlan>();
  plan->checkpoint = *ckpt;
  auto store = WeightStore::open(dir);
  ASSERT_TRUE(store.ok()) << store.status().message();
  store->set_quant_plan(plan);
  const nlohmann::json want = nlohmann::json::parse(read(dir + "/expected.json"));
  const int64_t out = want["out"], in = want["in"];
  auto linear = Linear::load(*make_cpu_backend(), *store, want["name"], out, in);
  ASSERT_TRUE(linear.ok()) << linear.status().message();
  ASSERT_TRUE(linear->quant);
  EXPECT_EQ(linear->quant->format, QuantFormat::kInt4Group);
  EXPECT_EQ(linear->quant->g_idx.defined(), expect_g_idx);
  Tensor w = linear->quant->dequantize();
  const std::vector<float> expected = want["weight"].get<std::vector<float>>();
  ASSERT_EQ(w.numel(), static_cast<int64_t>(expected.size()));
  int64_t bad = 0;
  for (int64_t i = 0; i < w.numel(); ++i) bad += w.f32()[i] != expected[i];
  EXPECT_EQ(bad, 0) << folder << ": " << bad << " weights differ";
}

TEST(QuantCheckpoint, AwqGemmLayoutDecodes) { expect_fixture_decodes("awq", false); }
TEST(QuantCheckpoint, GptqDecodes) { expect_fixture_decodes("gptq", false); }
TEST(QuantCheckpoint, GptqActOrderDecodes) { expect_fixture_decodes("gptq_act_order", true); }

TEST(QuantCheckpoint, PackedWeightsWithoutQuantizationConfigFail) {
  auto store = WeightStore::open(kFixtures + "awq");
  ASSERT_TRUE(store.ok());
  auto linear = Linear::load(*make_cpu_backend(), *store, "model.layers.0.mlp.down_proj", 16, 256);
  ASSERT_FALSE(linear.ok());
  EXPECT_NE(linear.status().message().find("quantization_config"), std::string::npos);
}

TEST(QuantCheckpoint, ParsesQuantizationConfigs) {
  auto awq = parse_checkpoint_quant(
      R"({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64,
          "zero_point": true, "version": "gemm"}})",
      "c");
  ASSERT_TRUE(awq.ok());
  EXPECT_EQ(awq->kind, CheckpointQuant::kAwq);
  EXPECT_EQ(awq->group_size, 64);
  EXPECT_FALSE(
      parse_checkpoint_quant(
          R"({"quantization_config": {"quant_method": "awq", "bits": 4, "version": "gemv"}})", "c")
          .ok());
  EXPECT_FALSE(
      parse_checkpoint_quant(R"({"quantization_config": {"quant_method": "gptq", "bits": 3}})", "c")
          .ok());
  auto none = parse_checkpoint_quant(R"({"hidden_size": 8})", "c");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kind, CheckpointQuant::kNone);
}

// A DeepSeek-V3 FP8 block weight: dequantized to fp32 by default, kept FP8 with --quantization
// fp8, and both decode to the same values (so the block kernel sees exactly the checkpoint).
TEST(QuantCheckpoint, Fp8BlockKeptAsQuantizedWeight) {
  namespace fs = std::filesystem;
  std::mt19937 rng(11);
  const int64_t out = 160, in = 200;  // partial blocks
  std::vector<uint8_t> codes(out * in);
  for (auto& c : codes) c = static_cast<uint8_t>(rng() % 0x7E) | (rng() % 2 ? 0x80 : 0);
  std::vector<float> scale(2 * 2);
  for (auto& s : scale) s = std::uniform_real_distribution<float>(0.001f, 0.01f)(rng);
  const fs::path dir = fs::temp_directory_path() / ("kite_fp8_block_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "model.safetensors", std::ios::binary)
      << test::serialize_safetensors({test::fp8_tensor("l.weight", codes, {out, in}),
                                      test::f32_tensor("l.weight_scale_inv", scale, {2, 2})});
  auto store = WeightStore::open(dir.string());
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto dense = Linear::load(*make_cpu_backend(), *store, "l", out, in);
  ASSERT_TRUE(dense.ok());
  EXPECT_FALSE(dense->quant);
  auto plan = std::make_shared<QuantPlan>();
  plan->method = QuantMethod::kFp8;
  plan->keep_fp8_block = true;
  store->set_quant_plan(plan);
  auto kept = Linear::load(*make_cpu_backend(), *store, "l", out, in);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  ASSERT_TRUE(kept->quant);
  EXPECT_EQ(kept->quant->format, QuantFormat::kFp8Block);
  Tensor w = kept->quant->dequantize();
  for (int64_t i = 0; i < w.numel(); ++i) ASSERT_EQ(w.f32()[i], dense->weight.f32()[i]) << i;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kite
