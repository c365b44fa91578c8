// UTF-8 helpers shared by the tokenizer: decoding one code point, validation, and the lossy
// conversion HF uses on decode (each maximal invalid subpart becomes one U+FFFD, the rule of
// Rust's String::from_utf8_lossy and of the WHATWG TextDecoder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kite::utf8 {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Length of the well-formed sequence starting at s[i] (1..4), or 0 if the bytes there do not
// start a well-formed sequence (an invalid lead byte, a bad continuation, overlong, surrogate,
// or a sequence cut short by the end of `s`).
size_t valid_sequence_length(std::string_view s, size_t i);

// Length of the maximal subpart at s[i]: the longest prefix of a well-formed sequence found there
// (at least 1). Lossy conversion replaces exactly these bytes by one U+FFFD.
size_t maximal_subpart_length(std::string_view s, size_t i);

// True if s[i..] is a proper prefix of some well-formed sequence (more bytes could complete it).
bool is_incomplete_prefix(std::string_view s, size_t i);

bool is_valid(std::string_view s);
// Offset of the first byte that does not start a well-formed sequence, or npos if `s` is valid.
size_t first_invalid(std::string_view s);

// Appends `s` to `out`, replacing every maximal invalid subpart by U+FFFD.
void append_lossy(std::string_view s, std::string* out);
std::string to_valid_lossy(std::string_view s);

// Decodes the well-formed sequence at s[*i] and advances *i. Requires valid UTF-8 at *i.
inline char32_t decode_valid(std::string_view s, size_t* i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + *i;
  unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *i += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    *i += 2;
    return (char32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b0 < 0xF0) {
    *i += 3;
    return (char32_t(b0 & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *i += 4;
  return (char32_t(b0 & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

void append_codepoint(char32_t cp, std::string* out);

// Length of the all-ASCII prefix of s[i..] (checked 8 bytes at a time): the common case that
// the validity and normalization scans skip quickly.
inline size_t ascii_run(std::string_view s, size_t i) {
  size_t start = i;
  while (i + 8 <= s.size()) {
    uint64_t w;
    __builtin_memcpy(&w, s.data() + i, 8);
    if (w & 0x8080808080808080ULL) break;
    i += 8;
  }
  while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80) ++i;
  return i - start;
}

}  // namespace kite::utf8
