#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>

namespace kite {
namespace {

TEST(Utf8Test, LossyReplacesEachMaximalSubpart) {
  // Cases from the Unicode standard's "U+FFFD substitution of maximal subparts" (Table 3-8).
  const std::string r(utf8::kReplacementUtf8);
  EXPECT_EQ(utf8::to_valid_lossy("a\x80z"), "a" + r + "z");
  EXPECT_EQ(utf8::to_valid_lossy("\xC0\xAF"), r + r);                  // overlong lead
  EXPECT_EQ(utf8::to_valid_lossy("\xE0\x80\x80"), r + r + r);          // overlong 3-byte
  EXPECT_EQ(utf8::to_valid_lossy("\xED\xA0\x80"), r + r + r);          // surrogate
  EXPECT_EQ(utf8::to_valid_lossy("\xF4\x90\x80\x80"), r + r + r + r);  // > U+10FFFF
  EXPECT_EQ(utf8::to_valid_lossy("\xE4\xB8"), r);                      // truncated: one subpart
  EXPECT_EQ(utf8::to_valid_lossy("\xF0\x9F\x98x"), r + "x");
  EXPECT_EQ(utf8::to_valid_lossy("\xE4\xB8\xAD\xE6"), "\xE4\xB8\xAD" + r);
  EXPECT_EQ(utf8::to_valid_lossy("\xFF\xFE"), r + r);
  EXPECT_EQ(utf8::to_valid_lossy("ok \xC3\xA9"), "ok \xC3\xA9");
}

TEST(Utf8Test, IncompletePrefixOnlyAtEnd) {
  EXPECT_TRUE(utf8::is_incomplete_prefix("\xE4\xB8", 0));
  EXPECT_TRUE(utf8::is_incomplete_prefix("a\xF0\x9F\x98", 1));
  EXPECT_FALSE(utf8::is_incomplete_prefix("\xE4\xB8x", 0));
  EXPECT_FALSE(utf8::is_incomplete_prefix("\xE0\x80", 0));  // can never become valid
  EXPECT_FALSE(utf8::is_incomplete_prefix("\x80", 0));
}

TEST(Utf8Test, RandomBytesBecomeValidAndValidTextIsKept) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);
    std::string fixed = utf8::to_valid_lossy(bytes);
    ASSERT_TRUE(utf8::is_valid(fixed));
    EXPECT_EQ(utf8::to_valid_lossy(fixed), fixed);
    EXPECT_EQ(utf8::is_valid(bytes), fixed == bytes);
  }
}

TEST(Utf8Test, FirstInvalidIsWhereLossyConversionFirstReplaces) {
  EXPECT_EQ(utf8::first_invalid("ok \xC3\xA9"), std::string_view::npos);
  EXPECT_EQ(utf8::first_invalid(""), std::string_view::npos);
  EXPECT_EQ(utf8::first_invalid("abc\xC3\xA9\x80"), 5u);  // a stray continuation byte
  EXPECT_EQ(utf8::first_invalid("\xE4\xB8"), 0u);         // cut short at the end
  std::mt19937 rng(11);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 128 + (rng() % 8 == 0 ? 128 : 0));
    const size_t i = utf8::first_invalid(bytes);
    const std::string fixed = utf8::to_valid_lossy(bytes);
    if (i == std::string_view::npos) {
      EXPECT_EQ(fixed, bytes);
    } else {  // the bytes before i are kept as they are, and a U+FFFD follows them
      ASSERT_LT(i, bytes.size());
      EXPECT_EQ(fixed.substr(0, i), bytes.substr(0, i));
      EXPECT_EQ(fixed.substr(i, 3), utf8::kReplacementUtf8);
    }
  }
}

TEST(Utf8Test, DecodeAndAppendRoundTrip) {
  for (char32_t cp : {U'A', U'\u00e9', U'\u4e2d', U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    utf8::append_codepoint(cp, &s);
    ASSERT_TRUE(utf8::is_valid(s));
    size_t i = 0;
    EXPECT_EQ(utf8::decode_valid(s, &i), cp);
    EXPECT_EQ(i, s.size());
  }
}

}  // namespace
}  // namespace kite
