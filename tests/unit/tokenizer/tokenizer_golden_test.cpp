// Golden tests: kite's Tokenizer against ids and text produced by @huggingface/tokenizers over
// the same tokenizer.json files (tools/fixtures/tokenizer/make_goldens.mjs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kite {
namespace {

using nlohmann::json;
using testing::golden_path;
using testing::read_jsonl;

std::string ids_str(const std::vector<int32_t>& ids) { return json(ids).dump(); }

// Streams `ids` through an IncrementalDetokenizer and concatenates the deltas.
std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDetokenizer detok(tok, skip);
  std::string text;
  for (int32_t id : ids) text += detok.add(id);
  return text + detok.finish();
}

class TokenizerGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGoldenTest, EncodeMatchesHuggingFace) {
  KITE_REFERENCE_TOKENIZER_OR_SKIP(tok, GetParam());
  std::vector<json> rows = read_jsonl(golden_path(GetParam(), ".jsonl"));
  ASSERT_GE(rows.size(), 2000u);
  int failures = 0;
  for (const json& row : rows) {
    const std::string text = row["text"];
    auto want = row["ids"].get<std::vector<int32_t>>();
    auto want_special = row["ids_special"].get<std::vector<int32_t>>();
    std::vector<int32_t> got = tok->encode(text, false);
    std::vector<int32_t> got_special = tok->encode(text, true);
    if (got != want || got_special != want_special) {
      if (++failures <= 10) {
        ADD_FAILURE() << "text " << json(text).dump() << "\n  want " << ids_str(want) << "\n  got  "
                      << ids_str(got) << "\n  want (special) " << ids_str(want_special)
                      << "\n  got  (special) " << ids_str(got_special);
      }
    }
  }
  EXPECT_EQ(failures, 0) << "of " << rows.size() << " golden strings";
}

TEST_P(TokenizerGoldenTest, DecodeMatchesHuggingFace) {
  KITE_REFERENCE_TOKENIZER_OR_SKIP(tok, GetParam());
  int failures = 0;
  for (const char* file : {".jsonl", ".decode.jsonl"}) {
    for (const json& row : read_jsonl(golden_path(GetParam(), file))) {
      auto ids = row.contains("ids_special") ? row["ids_special"].get<std::vector<int32_t>>()
                                             : row["ids"].get<std::vector<int32_t>>();
      std::string got = tok->decode(ids, false);
      std::string got_skip = tok->decode(ids, true);
      bool ok = got == row["decoded"] && got_skip == row["decoded_skip"];
      if (row.contains("decoded_clean"))
        ok = ok && clean_up_tokenization(got) == row["decoded_clean"];
      if (!ok && ++failures <= 10) {
        ADD_FAILURE() << "ids " << ids_str(ids) << "\n  want " << row["decoded"].dump()
                      << "\n  got  " << json(got).dump() << "\n  want (skip) "
                      << row["decoded_skip"].dump() << "\n  got  (skip) " << json(got_skip).dump();
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerGoldenTest, IncrementalDetokenizerMatchesFullDecode) {
  KITE_REFERENCE_TOKENIZER_OR_SKIP(tok, GetParam());
  int failures = 0;
  for (const char* file : {".jsonl", ".decode.jsonl"}) {
    for (const json& row : read_jsonl(golden_path(GetParam(), file))) {
      auto ids = row.contains("ids_special") ? row["ids_special"].get<std::vector<int32_t>>()
                                             : row["ids"].get<std::vector<int32_t>>();
      for (bool skip : {false, true}) {
        std::string want = row[skip ? "decoded_skip" : "decoded"];
        std::string got = stream_decode(*tok, ids, skip);
        if (got != want && ++failures <= 10) {
          ADD_FAILURE() << "ids " << ids_str(ids) << " skip=" << skip << "\n  want "
                        << json(want).dump() << "\n  got  " << json(got).dump();
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerGoldenTest, SpecialIdsAndVocab) {
  KITE_REFERENCE_TOKENIZER_OR_SKIP(tok, GetParam());
  const std::string name = GetParam();
  if (name == "llama3_1") {
    EXPECT_EQ(tok->bos_id(), 128000);
    EXPECT_EQ(tok->eos_id(), 128009);  // <|eot_id|>, from tokenizer_config.json
    EXPECT_EQ(tok->vocab_size(), 128256);
  } else if (name == "deepseek_v3") {
    EXPECT_EQ(tok->bos_id(), 0);
    EXPECT_EQ(tok->eos_id(), 1);
  } else {
    EXPECT_FALSE(tok->bos_id().has_value());
    EXPECT_EQ(tok->eos_id(), 151645);  // <|im_end|>
    EXPECT_EQ(tok->token_to_id("<|im_start|>"), 151644);
    EXPECT_TRUE(tok->is_special(151644));
    EXPECT_FALSE(tok->is_special(*tok->token_to_id("<tool_call>")));  // added, not special
  }
  for (int32_t id : {0, 1, 100, 1000, 50000, tok->vocab_size() - 1}) {
    std::optional<std::string> spelling = tok->id_to_token(id);
    ASSERT_TRUE(spelling.has_value()) << id;
    EXPECT_EQ(tok->token_to_id(*spelling), id) << *spelling;
  }
  EXPECT_FALSE(tok->id_to_token(tok->vocab_size()).has_value());
  EXPECT_FALSE(tok->id_to_token(-1).has_value());
}

INSTANTIATE_TEST_SUITE_P(Reference, TokenizerGoldenTest,
                         ::testing::ValuesIn(testing::golden_tokenizer_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kite
