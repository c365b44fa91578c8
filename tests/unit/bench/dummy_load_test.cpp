// --load-format dummy: every fixture architecture builds from config.json alone into a model
// whose forward gives finite, input-dependent logits, deterministically per seed; and the
// engine runs on such a folder (no tokenizer.json) with token-id prompts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "engine/llm.h"
#include "model/dummy_weights.h"
#include "model/model.h"
#include "runtime/model_runner.h"

namespace kite {
namespace {

namespace fs = std::filesystem;

// A temp folder holding only the fixture's config.json.
class ConfigOnlyDir {
 public:
  explicit ConfigOnlyDir(const std::string& fixture) {
    dir_ = fs::temp_directory_path() / ("kite_dummy_" + fixture + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    fs::copy_file(
        std::string(KITE_SOURCE_DIR) + "/tests/fixtures/models/" + fixture + "/config.json",
        dir_ / "config.json", fs::copy_options::overwrite_existing);
  }
  ~ConfigOnlyDir() { fs::remove_all(dir_); }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

std::vector<float> run_prompt(Model& model, const std::vector<int32_t>& ids) {
  KvCache cache(model.kv_cache_spec(), 8, 16);
  ModelRunner runner(model, cache);
  std::vector<int32_t> table(8);
  std::iota(table.begin(), table.end(), 0);
  SequenceChunk chunk{ids, 0, table, LogitsMode::kAll};
  Tensor logits = runner.execute({&chunk, 1});
  return {logits.data<float>(), logits.data<float>() + logits.numel()};
}

// Dummy weights from `seed`, the other options as they default.
LoadOptions dummy_options(uint64_t seed) {
  LoadOptions options;
  options.load_format = LoadFormat::kDummy;
  options.dummy_seed = seed;
  return options;
}

class DummyLoad : public ::testing::TestWithParam<std::string> {};

TEST_P(DummyLoad, ForwardGivesFiniteDeterministicLogits) {
  ConfigOnlyDir dir(GetParam());
  EXPECT_FALSE(load_model(dir.path()).ok()) << "the folder must hold no weights";
  auto a = load_model(dir.path(), dummy_options(1));
  ASSERT_TRUE(a.ok()) << a.status().message();
  const int64_t vocab = (*a)->config().vocab_size;
  std::mt19937 rng(4);
  std::vector<int32_t> ids(23);
  for (auto& t : ids) t = static_cast<int32_t>(rng() % vocab);
  std::vector<float> la = run_prompt(**a, ids);
  ASSERT_EQ(la.size(), ids.size() * static_cast<size_t>(vocab));
  double sum = 0, sq = 0;
  for (float x : la) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sq += double(x) * x;
  }
  const double std = std::sqrt(sq / la.size() - (sum / la.size()) * (sum / la.size()));
  EXPECT_GT(std, 0.05) << "logits should vary";
  EXPECT_LT(std, 50.0) << "activations should stay O(1) through the stack";
  // Rows differ between positions (the model attends to its input).
  EXPECT_NE(std::vector<float>(la.begin(), la.begin() + vocab),
            std::vector<float>(la.end() - vocab, la.end()));

  auto b = load_model(dir.path(), dummy_options(1));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(run_prompt(**b, ids), la) << "same seed, same weights";
  auto c = load_model(dir.path(), dummy_options(2));
  ASSERT_TRUE(c.ok());
  EXPECT_NE(run_prompt(**c, ids), la) << "another seed, other weights";
}

INSTANTIATE_TEST_SUITE_P(Bench, DummyLoad,
                         ::testing::Values("llama3", "qwen2", "deepseek_v2", "deepseek_v3"));

TEST(BenchDummyWeights, ScalesByKind) {
  Tensor w = make_dummy_tensor("model.layers.0.mlp.down_proj.weight", {96, 1024}, 9);
  double sum = 0, sq = 0;
  for (float x : w.f32()) sum += x, sq += double(x) * x;
  const double n = static_cast<double>(w.numel());
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sq / n), 1.0 / std::sqrt(1024.0), 0.02 / std::sqrt(1024.0));

  Tensor norm = make_dummy_tensor("model.layers.3.input_layernorm.weight", {512}, 9);
  float mn = 2, mx = 0;
  for (float x : norm.f32()) mn = std::min(mn, x), mx = std::max(mx, x);
  EXPECT_GE(mn, 0.95f);
  EXPECT_LE(mx, 1.05f);
  EXPECT_GT(mx - mn, 0.05f);  // not a constant

  Tensor bias = make_dummy_tensor("model.layers.0.self_attn.q_proj.bias", {512}, 9);
  for (float x : bias.f32()) ASSERT_LE(std::fabs(x), 0.02f);

  // Deterministic in (seed, name); names and seeds decorrelate.
  EXPECT_EQ(std::vector<float>(w.f32().begin(), w.f32().end()), [] {
    Tensor again = make_dummy_tensor("model.layers.0.mlp.down_proj.weight", {96, 1024}, 9);
    return std::vector<float>(again.f32().begin(), again.f32().end());
  }());
  Tensor other = make_dummy_tensor("model.layers.1.mlp.down_proj.weight", {96, 1024}, 9);
  EXPECT_NE(w.f32()[0], other.f32()[0]);
}

TEST(BenchDummyWeights, StoreTiesLmHeadOnlyWhenConfigured) {
  ModelConfig tied;
  tied.tie_word_embeddings = true;
  ModelConfig untied;
  EXPECT_FALSE(WeightStore::dummy(tied, 0).contains("lm_head.weight"));
  EXPECT_TRUE(WeightStore::dummy(untied, 0).contains("lm_head.weight"));
  EXPECT_TRUE(
      WeightStore::dummy(tied, 0).contains("model.layers.1.mlp.gate.e_score_correction_bias"));
  auto t = WeightStore::dummy(untied, 0).get_f32("x.weight", {3, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->shape(), (Shape{3, 5}));
}

TEST(BenchDummyEngine, RunsTokenIdPromptsWithoutTokenizer) {
  ConfigOnlyDir dir("deepseek_v2");
  EngineConfig config;
  config.model_dir = dir.path();
  config.kv_cache_memory_bytes = 8 << 20;
  EXPECT_FALSE(LLM::create(config).ok()) << "auto load of a config-only folder must fail";
  config.load_format = LoadFormat::kDummy;
  auto llm = LLM::create(config);
  ASSERT_TRUE(llm.ok()) << llm.status().message();
  GenerateInput in;
  in.prompt_token_ids = {300, 17, 420, 99, 5};
  in.sampling.temperature = 0;
  in.sampling.max_tokens = 6;
  in.sampling.ignore_eos = true;
  auto out = llm->generate({in, in});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].token_ids.size(), 6u);
  EXPECT_EQ((*out)[0].token_ids, (*out)[1].token_ids);  // greedy, same weights
  EXPECT_EQ((*out)[0].finish_reason, "length");
  // Every generated id past the 256 bytes reaches the text (engine/placeholder_tokenizer.h).
  for (int32_t id : (*out)[0].token_ids) {
    if (id < 256) continue;
    EXPECT_NE((*out)[0].text.find(" t" + std::to_string(id)), std::string::npos) << id;
  }
}

}  // namespace
}  // namespace kite
