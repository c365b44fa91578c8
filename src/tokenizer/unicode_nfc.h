// Unicode Normalization Form C (UAX #15), the "NFC" normalizer of Qwen2/Qwen3 tokenizer.json.
// The tables are generated (unicode_nfc_data.cpp, by tools/fixtures/tokenizer/make_nfc_tables.py)
// from one Unicode version; characters assigned after it pass through unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kite::unicode {

// Table rows, each table sorted by its first field(s).
struct CccRange {  // code points first..last have canonical combining class `ccc` (non-zero)
  uint32_t first, last, ccc;
};
struct Decomposition {  // canonical one-level decomposition of `cp` into d0 (+ d1 unless 0)
  uint32_t cp, d0, d1;
};
struct Composition {  // primary composite: first + second compose to `composite`
  uint32_t first, second, composite;
};
struct CodepointRange {
  uint32_t first, last;
};

extern const char* const kNfcUnicodeVersion;
extern const CccRange kCccRanges[];
extern const size_t kCccRangesSize;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionsSize;
extern const Composition kCompositions[];
extern const size_t kCompositionsSize;
// Code points whose NFC quick-check value is No or Maybe.
extern const CodepointRange kNotNfcQuickYes[];
extern const size_t kNotNfcQuickYesSize;

uint8_t combining_class(char32_t cp);

// True when `text` (valid UTF-8) is certainly already in NFC (the UAX #15 quick check); a false
// answer only means the full algorithm must run.
bool is_nfc_quick(std::string_view text);

// NFC of `text`, which must be valid UTF-8.
std::string to_nfc(std::string_view text);

}  // namespace kite::unicode
