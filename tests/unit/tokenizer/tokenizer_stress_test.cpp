// Concurrency and size limits of the Tokenizer on a real vocabulary.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "tokenizer_test_util.h"

namespace kite {
namespace {

TEST(TokenizerStressTest, ConcurrentEncodesAgreeWithSerial) {
  KITE_REFERENCE_TOKENIZER_OR_SKIP(tok, "qwen3");
  std::vector<nlohmann::json> rows = testing::read_jsonl(testing::golden_path("qwen3", ".jsonl"));
  rows.resize(400);
  std::vector<std::vector<int32_t>> want;
  for (const auto& row : rows) want.push_back(row["ids"].get<std::vector<int32_t>>());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Each thread walks the rows in its own order so cache fills interleave.
      for (size_t k = 0; k < rows.size(); ++k) {
        size_t i = (k * (2 * t + 1) + t * 37) % rows.size();
        if (tok->encode(rows[i]["text"].get<std::string>(), false) != want[i]) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerStressTest, LongRunsRoundTrip) {
  KITE_REFERENCE_TOKENIZER_OR_SKIP(tok, "llama3_1");
  std::mt19937 rng(5);
  std::string letters(200000, 'a');
  for (char& c : letters) c = static_cast<char>('a' + rng() % 3);
  for (const std::string& text : {std::string(300000, ' '), std::string(100000, '\n') + "x",
                                  letters, std::string(50000, '7'), std::string(20000, '!')}) {
    std::vector<int32_t> ids = tok->encode(text, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_LT(ids.size(), text.size());
    EXPECT_EQ(tok->decode(ids, false), text);
  }
}

}  // namespace
}  // namespace kite
