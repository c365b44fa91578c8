#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace kite::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // indexed by code point; every alphabet char is < 0x144

  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_char[b] = printable ? char32_t(b) : next++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables kTables;
  return kTables;
}

}  // namespace

char32_t byte_to_char(uint8_t b) { return tables().to_char[b]; }

std::optional<uint8_t> char_to_byte(char32_t c) {
  if (c >= 512) return std::nullopt;
  int16_t b = tables().to_byte[c];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) utf8::append_codepoint(byte_to_char(static_cast<uint8_t>(ch)), &out);
  return out;
}

std::optional<std::string> decode(std::string_view token) {
  if (!utf8::is_valid(token)) return std::nullopt;
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    std::optional<uint8_t> b = char_to_byte(utf8::decode_valid(token, &i));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace kite::byte_level
