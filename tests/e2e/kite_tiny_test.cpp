// The shipped model (models/kite-tiny) against transformers' fp32 outputs on its fixture
// prompts (tools/train/verify_with_transformers.py): logits within 1e-4 relative and the
// 32-token greedy continuations token for token.
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

const std::string kModelDir = std::string(KITE_SOURCE_DIR) + "/models/kite-tiny";
const std::string kFixtureDir = std::string(KITE_SOURCE_DIR) + "/tests/fixtures/kite_tiny";

TEST(KiteTiny, LogitsAndGreedyMatchTransformers) {
  auto model = load_model(kModelDir);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto expected = WeightStore::open(kFixtureDir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  std::ifstream f(kFixtureDir + "/expected.json");
  nlohmann::json meta = nlohmann::json::parse(f);
  const int64_t vocab = (*model)->config().vocab_size;
  ASSERT_GE(meta["prompts"].size(), 4u);
  for (size_t p = 0; p < meta["prompts"].size(); ++p) {
    const auto& rec = meta["prompts"][p];
    std::vector<int32_t> seq = rec["ids"].get<std::vector<int32_t>>();
    const auto want = rec["greedy"].get<std::vector<int32_t>>();
    KvCache cache((*model)->kv_cache_spec(), 8, 16);
    ModelRunner runner(**model, cache);
    std::vector<int32_t> table(8);
    std::iota(table.begin(), table.end(), 0);

    SequenceChunk prefill{seq, 0, table, LogitsMode::kAll};
    Tensor logits = runner.execute({&prefill, 1});
    auto ref =
        expected->get_f32("logits." + std::to_string(p), {static_cast<int64_t>(seq.size()), vocab});
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    EXPECT_LT(
        testing_util::relative_error(logits.data<float>(), ref->data<float>(), logits.numel()),
        1e-4)
        << rec["prompt"];

    std::vector<int32_t> got;
    const float* last = logits.data<float>() + (seq.size() - 1) * vocab;
    int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    while (true) {
      got.push_back(next);
      if (got.size() == want.size()) break;
      int32_t computed = static_cast<int32_t>(seq.size());
      seq.push_back(next);
      SequenceChunk step{std::span<const int32_t>(&seq.back(), 1), computed, table,
                         LogitsMode::kLast};
      Tensor l = runner.execute({&step, 1});
      next = static_cast<int32_t>(std::max_element(l.data<float>(), l.data<float>() + vocab) -
                                  l.data<float>());
    }
    EXPECT_EQ(got, want) << rec["prompt"];
  }
}

}  // namespace
}  // namespace kite
