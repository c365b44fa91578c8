#include "tokenizer/utf8.h"

namespace kite::utf8 {
namespace {

// For a lead byte, the allowed range of the second byte (Unicode Table 3-7); later
// continuation bytes are always 0x80..0xBF.
struct LeadInfo {
  uint8_t length;  // 0 = not a lead byte
  uint8_t lo;
  uint8_t hi;
};

LeadInfo lead_info(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes at s[i] that form a prefix of a well-formed sequence, and that sequence's
// full length (0 when the lead byte is invalid).
std::pair<size_t, size_t> matched_prefix(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  LeadInfo info = lead_info(b);
  if (info.length <= 1) return {info.length, info.length};
  size_t n = 1;
  while (n < info.length && i + n < s.size()) {
    auto c = static_cast<unsigned char>(s[i + n]);
    bool ok = n == 1 ? (c >= info.lo && c <= info.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return {n, info.length};
}

}  // namespace

size_t valid_sequence_length(std::string_view s, size_t i) {
  auto [n, len] = matched_prefix(s, i);
  return n == len ? len : 0;
}

size_t maximal_subpart_length(std::string_view s, size_t i) {
  auto [n, len] = matched_prefix(s, i);
  return n == 0 ? 1 : n;
}

bool is_incomplete_prefix(std::string_view s, size_t i) {
  auto [n, len] = matched_prefix(s, i);
  return n > 0 && n < len && i + n == s.size();
}

size_t first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      i += ascii_run(s, i);
      continue;
    }
    size_t n = valid_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

bool is_valid(std::string_view s) { return first_invalid(s) == std::string_view::npos; }

void append_lossy(std::string_view s, std::string* out) {
  size_t i = 0;
  size_t run_start = 0;  // start of the pending run of valid bytes
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      i += ascii_run(s, i);
      continue;
    }
    size_t n = valid_sequence_length(s, i);
    if (n != 0) {
      i += n;
      continue;
    }
    out->append(s.substr(run_start, i - run_start));
    out->append(kReplacementUtf8);
    i += maximal_subpart_length(s, i);
    run_start = i;
  }
  out->append(s.substr(run_start));
}

std::string to_valid_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_lossy(s, &out);
  return out;
}

void append_codepoint(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace kite::utf8
