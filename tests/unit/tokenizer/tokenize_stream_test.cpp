#include "tokenizer/tokenize_stream.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tiny_tokenizer.h"

namespace kite {
namespace {

Tokenizer tiny() { return Tokenizer::from_json(testing::tiny_tokenizer_json().dump(), "").value(); }

TEST(TokenizeStreamTest, EncodesAndDecodesJsonLines) {
  Tokenizer tok = tiny();
  std::istringstream in("\"hello\"\n\n\"a<s>\\u00e9\"\n");
  std::ostringstream out;
  ASSERT_TRUE(run_tokenize_stream(tok, in, out, {.add_special_tokens = true}).ok());
  EXPECT_EQ(out.str(), "[300,259]\n[300,97,300,195,169]\n");

  std::istringstream ids_in("[300,259]\n[97,300,195,169]\n");
  std::ostringstream text_out;
  ASSERT_TRUE(
      run_tokenize_stream(tok, ids_in, text_out, {.decode = true, .skip_special_tokens = true})
          .ok());
  EXPECT_EQ(text_out.str(), "\"hello\"\n\"a\xC3\xA9\"\n");
}

TEST(TokenizeStreamTest, BadLineNamesItsNumber) {
  Tokenizer tok = tiny();
  std::istringstream in("\"ok\"\n{\"text\": 1}\n");
  std::ostringstream out;
  Status s = run_tokenize_stream(tok, in, out, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
  EXPECT_EQ(out.str(), "[111,107]\n");

  std::istringstream bad_ids("[1, -2]\n");
  Status d = run_tokenize_stream(tok, bad_ids, out, {.decode = true});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("line 1"), std::string::npos) << d.message();
  std::istringstream not_json("\"unterminated\n");
  EXPECT_FALSE(run_tokenize_stream(tok, not_json, out, {}).ok());
}

}  // namespace
}  // namespace kite
