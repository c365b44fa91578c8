// The GPT-2 byte-level alphabet: each byte 0..255 is shown as one printable code point
// (printable Latin-1 bytes as themselves, the rest as U+0100 + n), so a byte-level BPE vocabulary
// stores raw bytes as text. kite keeps pre-tokens and BPE symbols as raw bytes and uses this
// mapping only to read and write vocabulary strings.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kite::byte_level {

// The code point that stands for byte `b`.
char32_t byte_to_char(uint8_t b);

// The byte that code point `c` stands for, if it is one of the 256 alphabet characters.
std::optional<uint8_t> char_to_byte(char32_t c);

// Maps every byte of `bytes` to its alphabet character (UTF-8 encoded).
std::string encode(std::string_view bytes);

// Maps a vocabulary string back to raw bytes; nullopt if it holds a character outside the
// alphabet (e.g. an added token such as "<｜begin▁of▁sentence｜>") or is not valid UTF-8.
std::optional<std::string> decode(std::string_view token);

}  // namespace kite::byte_level
