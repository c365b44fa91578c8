#include "tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "tiny_tokenizer.h"
#include "tokenizer/utf8.h"

namespace kite {
namespace {

Tokenizer tiny() { return Tokenizer::from_json(testing::tiny_tokenizer_json().dump(), "").value(); }

TEST(IncrementalDetokenizerTest, HoldsBackSplitCharacters) {
  Tokenizer tok = tiny();
  IncrementalDetokenizer d(tok, false);
  EXPECT_EQ(d.add('a'), "a");
  EXPECT_EQ(d.add(0xE4), "");  // first byte of 中
  EXPECT_EQ(d.add(0xB8), "");
  EXPECT_EQ(d.pending_bytes(), 2u);
  EXPECT_EQ(d.add(0xAD), "\xE4\xB8\xAD");
  EXPECT_EQ(d.add(0xF0), "");
  EXPECT_EQ(d.add('x'), "\xEF\xBF\xBDx");  // the cut sequence can no longer complete
  EXPECT_EQ(d.add(0xE4), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(IncrementalDetokenizerTest, SkipsSpecialTokensWhenAsked) {
  Tokenizer tok = tiny();
  IncrementalDetokenizer skip(tok, true), keep(tok, false);
  EXPECT_EQ(skip.add(300), "");
  EXPECT_EQ(keep.add(300), "<s>");
  EXPECT_EQ(skip.add(301), "<tool>");  // added but not special
}

// Random bytes (every id of the tiny tokenizer below 256 is one byte), fed one id at a time:
// every delta is valid UTF-8 and the deltas add up to the lossy decode of all the bytes.
TEST(IncrementalDetokenizerTest, RandomBytesNeverYieldInvalidUtf8) {
  Tokenizer tok = tiny();
  std::mt19937 rng(1234);
  // Bias toward UTF-8 lead/continuation bytes so most sequences are near-valid.
  std::vector<int> pool;
  for (int b = 0; b < 256; ++b) pool.push_back(b);
  for (int b = 0x80; b < 0xC0; ++b) pool.insert(pool.end(), 3, b);
  for (int b : {0xE4, 0xF0, 0xF0, 0xC3, 0xED, 0xE0, 0xF4}) pool.insert(pool.end(), 8, b);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<int32_t> ids(1 + rng() % 30);
    for (int32_t& id : ids) id = pool[rng() % pool.size()];
    IncrementalDetokenizer d(tok, false);
    std::string all;
    for (int32_t id : ids) {
      std::string delta = d.add(id);
      ASSERT_TRUE(utf8::is_valid(delta));
      ASSERT_LE(d.pending_bytes(), 3u);
      all += delta;
    }
    std::string tail = d.finish();
    ASSERT_TRUE(utf8::is_valid(tail));
    all += tail;
    ASSERT_EQ(all, tok.decode(ids, false));
  }
}

}  // namespace
}  // namespace kite
