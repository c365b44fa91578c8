// Tokenizer behaviour on a tiny hand-made tokenizer.json (no npm fixtures needed): BPE merge
// order, added-token matching with lstrip/rstrip, NFC, templates, load errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kite {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

Tokenizer tiny(const json& config = json()) {
  Result<Tokenizer> tok = Tokenizer::from_json(testing::tiny_tokenizer_json().dump(),
                                               config.is_null() ? "" : config.dump());
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return std::move(tok).value();
}

TEST(TokenizerUnitTest, MergesByRank) {
  Tokenizer tok = tiny();
  EXPECT_EQ(tok.encode("hello", false), (Ids{259}));
  EXPECT_EQ(tok.encode("hello world", false), (Ids{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tok.encode("hellhe", false), (Ids{258, 256}));  // he,ll,he -> hell,he
  EXPECT_EQ(tok.encode("12", false), (Ids{'1', '2'}));
  EXPECT_EQ(tok.encode("", true), (Ids{300}));
  EXPECT_EQ(tok.encode("hello", true), (Ids{300, 259}));
}

TEST(TokenizerUnitTest, AddedTokensAndStrip) {
  Tokenizer tok = tiny();
  EXPECT_EQ(tok.encode("a<s>b", false), (Ids{'a', 300, 'b'}));
  EXPECT_EQ(tok.encode("<s><s", false), (Ids{300, '<', 's'}));
  EXPECT_EQ(tok.encode("x<tool>y", false), (Ids{'x', 301, 'y'}));
  EXPECT_EQ(tok.encode("a  [L]b", false), (Ids{'a', 302, 'b'}));    // lstrip eats "  "
  EXPECT_EQ(tok.encode("a[R] \t b", false), (Ids{'a', 303, 'b'}));  // rstrip eats " \t "
  EXPECT_EQ(tok.decode(Ids{'a', 300, 301, 'b'}, false), "a<s><tool>b");
  EXPECT_EQ(tok.decode(Ids{'a', 300, 301, 'b'}, true), "a<tool>b");  // <tool> is not special
  EXPECT_TRUE(tok.is_special(300));
  EXPECT_FALSE(tok.is_special(301));
}

TEST(TokenizerUnitTest, NormalizesToNfcAndRepairsInvalidInput) {
  Tokenizer tok = tiny();
  EXPECT_EQ(tok.encode("e\xCC\x81", false), tok.encode("\xC3\xA9", false));
  EXPECT_EQ(tok.encode("a\xFF", false), tok.encode("a\xEF\xBF\xBD", false));
}

TEST(TokenizerUnitTest, DecodeSkipsUnknownIdsAndRepairsBytes) {
  Tokenizer tok = tiny();
  EXPECT_EQ(tok.decode(Ids{'h', 999999, -5, 'i'}, false), "hi");
  EXPECT_EQ(tok.decode(Ids{0xE4, 0xB8, 'x'}, false), "\xEF\xBF\xBDx");
  EXPECT_EQ(tok.decode(Ids{0xE4, 0xB8, 0xAD}, false), "\xE4\xB8\xAD");
  EXPECT_EQ(tok.id_to_token(260), "\xC4\xA0w");
  EXPECT_EQ(tok.token_to_id("<tool>"), 301);
  EXPECT_EQ(tok.vocab_size(), 304);
  EXPECT_EQ(tok.token_bytes(260), " w");
}

TEST(TokenizerUnitTest, LlamaFastConfigRebuildsTemplate) {
  json config = {{"tokenizer_class", "LlamaTokenizerFast"},
                 {"bos_token", "<s>"},
                 {"eos_token", "[R]"},
                 {"add_bos_token", true},
                 {"add_eos_token", true}};
  Tokenizer tok = tiny(config);
  EXPECT_EQ(tok.encode("hello", true), (Ids{300, 259, 303}));
  EXPECT_EQ(tok.encode("hello", false), (Ids{259}));
  EXPECT_EQ(tok.bos_id(), 300);
  EXPECT_EQ(tok.eos_id(), 303);
  config["add_bos_token"] = false;
  EXPECT_EQ(tiny(config).encode("hello", true), (Ids{259, 303}));
}

TEST(TokenizerUnitTest, CleanUpTokenization) {
  EXPECT_EQ(clean_up_tokenization("Hello , world ! I 'm sure it 's fine . Is n't it ?"),
            "Hello, world! I'm sure it's fine. Isn't it?");
}

TEST(TokenizerUnitTest, LoadErrorsAreActionable) {
  Result<Tokenizer> missing = Tokenizer::from_dir("/nonexistent/model");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("tokenizer.json"), std::string::npos);

  Result<Tokenizer> garbage = Tokenizer::from_json("{not json", "");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), ErrorCode::kCorrupt);

  json wordpiece = testing::tiny_tokenizer_json();
  wordpiece["model"]["type"] = "WordPiece";
  Result<Tokenizer> wp = Tokenizer::from_json(wordpiece.dump(), "");
  ASSERT_FALSE(wp.ok());
  EXPECT_EQ(wp.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(wp.status().message().find("WordPiece"), std::string::npos);

  json metaspace = testing::tiny_tokenizer_json();
  metaspace["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_EQ(Tokenizer::from_json(metaspace.dump(), "").status().code(), ErrorCode::kUnsupported);

  json bad_merge = testing::tiny_tokenizer_json();
  bad_merge["model"]["merges"].push_back("zz qq");
  Result<Tokenizer> bm = Tokenizer::from_json(bad_merge.dump(), "");
  ASSERT_FALSE(bm.ok());
  EXPECT_NE(bm.status().message().find("merges[5]"), std::string::npos);
}

TEST(TokenizerUnitTest, FromDirReadsConfig) {
  auto dir = std::filesystem::temp_directory_path() / ("kite_tok_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << testing::tiny_tokenizer_json().dump();
  std::ofstream(dir / "tokenizer_config.json") << json{{"eos_token", {{"content", "[R]"}}}}.dump();
  Result<Tokenizer> tok = Tokenizer::from_dir(dir.string());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(tok->eos_id(), 303);
  EXPECT_FALSE(tok->bos_id().has_value());
}

}  // namespace
}  // namespace kite
