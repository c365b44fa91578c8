// The placeholder tokenizer of a dummy load: text in as bytes, every id out as text.
#include "engine/placeholder_tokenizer.h"

#include <gtest/gtest.h>

#include <vector>

namespace kite {
namespace {

TEST(PlaceholderTokenizer, TextEncodesToBytesAndEveryIdDecodesToText) {
  auto tok = placeholder_tokenizer(1000);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  // Even text that spells a generated token's text comes back as its bytes (no merges).
  const std::vector<int32_t> hi = tok->encode("Hi t300", false);
  EXPECT_EQ(hi, (std::vector<int32_t>{'H', 'i', ' ', 't', '3', '0', '0'}));
  EXPECT_EQ(tok->decode(hi, false), "Hi t300");
  const std::vector<int32_t> generated = {300, 999, 256};
  EXPECT_EQ(tok->decode(generated, false), " t300 t999 t256");
  EXPECT_EQ(tok->token_bytes(1000), "") << "past the vocabulary";
}

}  // namespace
}  // namespace kite
