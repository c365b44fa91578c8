#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "tokenizer/utf8.h"

namespace kite::unicode {
namespace {

// Hangul syllables compose and decompose by arithmetic (Unicode 3.12), not by table.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

const Decomposition* find_decomposition(char32_t cp) {
  const Decomposition* end = kDecompositions + kDecompositionsSize;
  const Decomposition* it = std::lower_bound(
      kDecompositions, end, cp, [](const Decomposition& d, char32_t c) { return d.cp < c; });
  return (it != end && it->cp == cp) ? it : nullptr;
}

void decompose(char32_t cp, std::vector<char32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition* d = cp >= 0xC0 ? find_decomposition(cp) : nullptr;
  if (d == nullptr) {
    out->push_back(cp);
    return;
  }
  decompose(d->d0, out);
  if (d->d1 != 0) decompose(d->d1, out);
}

// The primary composite of (a, b), or 0 if they do not compose.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const Composition* end = kCompositions + kCompositionsSize;
  const Composition* it =
      std::lower_bound(kCompositions, end, std::make_pair(a, b),
                       [](const Composition& c, std::pair<char32_t, char32_t> key) {
                         return c.first != key.first ? c.first < key.first : c.second < key.second;
                       });
  return (it != end && it->first == a && it->second == b) ? it->composite : 0;
}

bool quick_check_yes(char32_t cp) {
  const CodepointRange* end = kNotNfcQuickYes + kNotNfcQuickYesSize;
  const CodepointRange* it = std::upper_bound(
      kNotNfcQuickYes, end, cp, [](char32_t c, const CodepointRange& r) { return c < r.first; });
  if (it == kNotNfcQuickYes) return true;
  --it;
  return cp > it->last;
}

// Canonical ordering: a stable sort of each run of non-starters by combining class.
void canonical_order(std::vector<char32_t>* cps, std::vector<uint8_t>* ccc) {
  size_t n = cps->size();
  ccc->resize(n);
  for (size_t i = 0; i < n; ++i) (*ccc)[i] = combining_class((*cps)[i]);
  for (size_t i = 1; i < n; ++i) {  // insertion sort: runs are short
    for (size_t j = i; j > 0 && (*ccc)[j] != 0 && (*ccc)[j - 1] > (*ccc)[j]; --j) {
      std::swap((*cps)[j], (*cps)[j - 1]);
      std::swap((*ccc)[j], (*ccc)[j - 1]);
    }
  }
}

// Canonical composition (UAX #15 section 1.3) in place.
void compose(std::vector<char32_t>* cps, const std::vector<uint8_t>& ccc) {
  std::vector<char32_t>& v = *cps;
  if (v.empty()) return;
  size_t starter = 0;
  bool have_starter = ccc[0] == 0;
  uint8_t last_ccc = have_starter ? 0 : 255;
  size_t out = 1;
  for (size_t i = 1; i < v.size(); ++i) {
    char32_t c = v[i];
    uint8_t cc = ccc[i];
    // C is blocked from the starter if something between has class 0 or >= its class.
    bool blocked = out - 1 != starter && (last_ccc == 0 || last_ccc >= cc);
    if (have_starter && !blocked) {
      char32_t composite = compose_pair(v[starter], c);
      if (composite != 0) {
        v[starter] = composite;
        continue;
      }
    }
    if (cc == 0) {
      starter = out;
      have_starter = true;
    }
    last_ccc = cc;
    v[out++] = c;
  }
  v.resize(out);
}

}  // namespace

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const CccRange* end = kCccRanges + kCccRangesSize;
  const CccRange* it = std::upper_bound(kCccRanges, end, cp,
                                        [](char32_t c, const CccRange& r) { return c < r.first; });
  if (it == kCccRanges) return 0;
  --it;
  return cp <= it->last ? static_cast<uint8_t>(it->ccc) : 0;
}

bool is_nfc_quick(std::string_view text) {
  uint8_t last_ccc = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      i += utf8::ascii_run(text, i);
      last_ccc = 0;
      continue;
    }
    if (static_cast<unsigned char>(text[i]) < 0xCC) {  // below U+0300: always NFC, class 0
      i += 2;
      last_ccc = 0;
      continue;
    }
    char32_t cp = utf8::decode_valid(text, &i);
    uint8_t cc = combining_class(cp);
    if (cc != 0 && last_ccc > cc) return false;
    if (!quick_check_yes(cp)) return false;
    last_ccc = cc;
  }
  return true;
}

std::string to_nfc(std::string_view text) {
  if (is_nfc_quick(text)) return std::string(text);
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) decompose(utf8::decode_valid(text, &i), &cps);
  std::vector<uint8_t> ccc;
  canonical_order(&cps, &ccc);
  compose(&cps, ccc);
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : cps) utf8::append_codepoint(cp, &out);
  return out;
}

}  // namespace kite::unicode
