#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kite {
namespace {

using nlohmann::json;
using Pieces = std::vector<std::string>;

Pieces split_with(const json& step, std::string_view text) {
  json config = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({step, {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  Result<PreTokenizer> pt = PreTokenizer::from_json(config);
  EXPECT_TRUE(pt.ok()) << pt.status().message();
  return pt->split(text);
}

json split_step(const char* behavior, bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"String", "-"}}},
          {"behavior", behavior},
          {"invert", invert}};
}

// The examples of HF tokenizers' SplitDelimiterBehavior documentation.
TEST(PreTokenizerTest, SplitBehaviorsMatchHuggingFaceDocs) {
  const char* text = "the-final--countdown";
  EXPECT_EQ(split_with(split_step("Removed"), text), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(split_with(split_step("Isolated"), text),
            (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_with(split_step("MergedWithPrevious"), text),
            (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_with(split_step("MergedWithNext"), text),
            (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_with(split_step("Contiguous"), text),
            (Pieces{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split_with(split_step("Removed", /*invert=*/true), text), (Pieces{"-", "-", "-"}));
}

TEST(PreTokenizerTest, Digits) {
  json contiguous = {{"type", "Digits"}, {"individual_digits", false}};
  json individual = {{"type", "Digits"}, {"individual_digits", true}};
  EXPECT_EQ(split_with(contiguous, "Call 123 please"), (Pieces{"Call ", "123", " please"}));
  EXPECT_EQ(split_with(individual, "Call 123 please"), (Pieces{"Call ", "1", "2", "3", " please"}));
}

TEST(PreTokenizerTest, ByteLevelGpt2RegexAndPrefixSpace) {
  json config = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  Result<PreTokenizer> pt = PreTokenizer::from_json(config);
  ASSERT_TRUE(pt.ok()) << pt.status().message();
  EXPECT_EQ(pt->split("Hello world's  42!!\n"),
            (Pieces{" Hello", " world", "'s", " ", " 42", "!!", "\n"}));
}

TEST(PreTokenizerTest, OnigSpaceClassIsRewritten) {
  // U+0085 is whitespace for Oniguruma (and HF) but not for PCRE2's own \s.
  json step = {{"type", "Split"}, {"pattern", {{"Regex", R"(\s+)"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(split_with(step,
                       "a\xC2\x85"
                       "b"),
            (Pieces{"a", "\xC2\x85", "b"}));
  EXPECT_EQ(split_with(step,
                       "a\xEF\xBB\xBF"
                       "b"),
            (Pieces{"a\xEF\xBB\xBF"
                    "b"}));  // U+FEFF is not
}

TEST(PreTokenizerTest, RejectsWhatItCannotRun) {
  EXPECT_FALSE(PreTokenizer::from_json({{"type", "Whitespace"}}).ok());
  EXPECT_FALSE(PreTokenizer::from_json(nullptr).ok());  // not byte-level
  json bad_regex = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array(
           {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
            {{"type", "ByteLevel"}}})}};
  Result<PreTokenizer> r = PreTokenizer::from_json(bad_regex);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(unclosed"), std::string::npos);
}

}  // namespace
}  // namespace kite
