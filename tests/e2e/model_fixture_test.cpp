// Every supported architecture against transformers' fp32 outputs on the committed fixtures
// (tools/fixtures/make_model_fixtures.py): full-prompt logits within 1e-4 relative, and the
// 32-token greedy continuation token for token — once prefilling the prompt in one step and
// once in chunks of 5 tokens, so the paged cache and chunked prefill path are both checked.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "model/model.h"
#include "reference_compare.h"
#include "runtime/model_runner.h"

namespace kite {
namespace {

std::string fixture_dir(const std::string& name) {
  return std::string(KITE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

class ModelFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelFixture, LogitsMatchTransformers) {
  const std::string dir = fixture_dir(GetParam());
  auto model = load_model(dir);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto expected = WeightStore::open(dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  nlohmann::json meta = read_json(dir + "/expected.json");
  const int64_t vocab = (*model)->config().vocab_size;
  KvCache cache((*model)->kv_cache_spec(), 64, 16);
  ModelRunner runner(**model, cache);
  for (size_t p = 0; p < meta["prompts"].size(); ++p) {
    std::vector<int32_t> ids = meta["prompts"][p].get<std::vector<int32_t>>();
    std::vector<int32_t> table(8);
    std::iota(table.begin(), table.end(), 3);  // not starting at block 0 on purpose
    SequenceChunk chunk{ids, 0, table, LogitsMode::kAll};
    Tensor logits = runner.execute({&chunk, 1});
    auto want =
        expected->get_f32("logits." + std::to_string(p), {static_cast<int64_t>(ids.size()), vocab});
    ASSERT_TRUE(want.ok()) << want.status().message();
    double err =
        testing_util::relative_error(logits.data<float>(), want->data<float>(), logits.numel());
    EXPECT_LT(err, 1e-4) << GetParam() << " prompt " << p << " (" << ids.size() << " tokens)";
  }
}

// Greedy decoding with the KV cache, prefilling in chunks of `chunk_tokens` (0: all at once).
std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& prompt, int new_tokens,
                            size_t chunk_tokens) {
  KvCache cache(model.kv_cache_spec(), 16, 16);
  ModelRunner runner(model, cache);
  std::vector<int32_t> table = {5, 2, 9, 0, 7, 11, 1, 3};  // scattered blocks
  std::vector<int32_t> seq = prompt;
  int32_t computed = 0;
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < new_tokens) {
    size_t n = seq.size() - computed;
    if (chunk_tokens && n > chunk_tokens) n = chunk_tokens;
    bool last = computed + n == seq.size();
    std::span<const int32_t> tokens(seq.data() + computed, n);
    SequenceChunk chunk{tokens, computed, table, last ? LogitsMode::kLast : LogitsMode::kNone};
    Tensor logits = runner.execute({&chunk, 1});
    computed += static_cast<int32_t>(n);
    if (last) {
      int32_t next = argmax(logits.data<float>(), logits.size(1));
      out.push_back(next);
      seq.push_back(next);
    }
  }
  return out;
}

TEST_P(ModelFixture, GreedyContinuationMatchesTransformers) {
  const std::string dir = fixture_dir(GetParam());
  auto model = load_model(dir);
  ASSERT_TRUE(model.ok()) << model.status().message();
  nlohmann::json meta = read_json(dir + "/expected.json");
  for (size_t p = 0; p < meta["prompts"].size(); ++p) {
    auto prompt = meta["prompts"][p].get<std::vector<int32_t>>();
    auto want = meta["greedy"][p].get<std::vector<int32_t>>();
    EXPECT_EQ(greedy(**model, prompt, static_cast<int>(want.size()), 0), want)
        << GetParam() << " prompt " << p;
    EXPECT_EQ(greedy(**model, prompt, static_cast<int>(want.size()), 5), want)
        << GetParam() << " prompt " << p << " (chunked prefill)";
  }
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, ModelFixture,
                         ::testing::Values("llama3", "qwen2", "deepseek_v2", "deepseek_v3",
                                           "deepseek_v2_all_experts", "deepseek_v3_all_experts"));

}  // namespace
}  // namespace kite
