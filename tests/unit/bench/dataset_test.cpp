// Dataset generation: exact token-id lengths, shared prefixes, id range, determinism, JSONL.
#include "bench/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace kite::bench {
namespace {

TEST(BenchDataset, RandomTokenIdsHaveExactLengthAndRange) {
  DatasetConfig c;
  c.input_len = 37;
  c.output_len = 9;
  c.num_prompts = 50;
  c.vocab_size = 1000;
  c.seed = 5;
  auto d = build_dataset(c);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 50u);
  std::set<std::vector<int32_t>> distinct;
  std::set<int32_t> ids;
  for (const auto& r : *d) {
    ASSERT_EQ(r.prompt_token_ids.size(), 37u);
    EXPECT_EQ(r.input_len, 37);
    EXPECT_EQ(r.output_len, 9);
    EXPECT_TRUE(r.prompt_text.empty());
    for (int32_t t : r.prompt_token_ids) {
      ASSERT_GE(t, kMinRandomTokenId);
      ASSERT_LT(t, 1000);
      ids.insert(t);
    }
    distinct.insert(r.prompt_token_ids);
  }
  EXPECT_EQ(distinct.size(), 50u);  // no accidental prefix-cache hits between prompts
  EXPECT_GT(ids.size(), 600u);      // covers the range
  auto again = build_dataset(c);
  EXPECT_EQ((*again)[7].prompt_token_ids, (*d)[7].prompt_token_ids);
  c.seed = 6;
  auto other = build_dataset(c);
  EXPECT_NE((*other)[7].prompt_token_ids, (*d)[7].prompt_token_ids);
}

TEST(BenchDataset, SmallVocabularyUsesWholeRange) {
  auto ids = random_token_ids(500, 64, 1);
  for (int32_t t : ids) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 64);
  }
}

TEST(BenchDataset, SharedPrefixIsCommonAndSuffixRandom) {
  DatasetConfig c;
  c.kind = DatasetKind::kSharedPrefix;
  c.prefix_len = 64;
  c.input_len = 16;
  c.num_prefixes = 2;
  c.num_prompts = 10;
  auto d = build_dataset(c);
  ASSERT_TRUE(d.ok()) << d.status().message();
  for (size_t i = 0; i < d->size(); ++i) {
    const auto& r = (*d)[i];
    ASSERT_EQ(r.prompt_token_ids.size(), 80u);
    EXPECT_EQ(r.input_len, 80);
    const auto& same = (*d)[i % 2];
    EXPECT_TRUE(std::equal(r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + 64,
                           same.prompt_token_ids.begin()));
    if (i >= 2) {
      EXPECT_NE(r.prompt_token_ids, same.prompt_token_ids);  // suffixes differ
    }
  }
  EXPECT_FALSE(std::equal((*d)[0].prompt_token_ids.begin(), (*d)[0].prompt_token_ids.begin() + 64,
                          (*d)[1].prompt_token_ids.begin()));  // two distinct prefixes
  c.prefix_len = 0;
  EXPECT_FALSE(build_dataset(c).ok());
}

TEST(BenchDataset, TextPromptsHaveRequestedWordCount) {
  DatasetConfig c;
  c.kind = DatasetKind::kSharedPrefix;
  c.format = PromptFormat::kText;
  c.prefix_len = 20;
  c.input_len = 30;
  c.num_prompts = 3;
  auto d = build_dataset(c);
  ASSERT_TRUE(d.ok());
  for (const auto& r : *d) {
    EXPECT_TRUE(r.prompt_token_ids.empty());
    std::istringstream words(r.prompt_text);
    int n = 0;
    for (std::string w; words >> w;) ++n;
    EXPECT_EQ(n, 50);
    EXPECT_EQ(r.prompt_text.substr(0, 40), (*d)[0].prompt_text.substr(0, 40));
  }
}

class BenchJsonl : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("kite_bench_" + std::to_string(::getpid()) + ".jsonl"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  std::string path_;
};

TEST_F(BenchJsonl, ParsesPromptsMessagesAndCycles) {
  write(
      "{\"prompt\": \"tell me a story\"}\n\n"
      "{\"prompt\": [5, 6, 7], \"max_tokens\": 3}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  DatasetConfig c;
  c.kind = DatasetKind::kJsonl;
  c.path = path_;
  c.num_prompts = 5;
  c.output_len = 11;
  auto d = build_dataset(c);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 5u);
  EXPECT_EQ((*d)[0].prompt_text, "tell me a story");
  EXPECT_EQ((*d)[0].output_len, 11);
  EXPECT_EQ((*d)[1].prompt_token_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ((*d)[1].output_len, 3);
  EXPECT_EQ((*d)[2].messages[0]["content"], "hi");
  EXPECT_EQ((*d)[3].prompt_text, "tell me a story");  // reused from the top
}

TEST_F(BenchJsonl, ErrorsNameTheLine) {
  write("{\"prompt\": \"ok\"}\n{\"text\": \"no prompt\"}\n");
  DatasetConfig c;
  c.kind = DatasetKind::kJsonl;
  c.path = path_;
  auto d = build_dataset(c);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(":2:"), std::string::npos) << d.status().message();
  write("{broken\n");
  EXPECT_FALSE(build_dataset(c).ok());
  c.path = path_ + ".missing";
  EXPECT_EQ(build_dataset(c).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kite::bench
