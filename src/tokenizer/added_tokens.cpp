#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace kite {
namespace {

// Rust's char::is_whitespace (the White_Space property), which HF uses for lstrip/rstrip.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Start of the run of whitespace characters that ends at byte `end` of `text`.
size_t whitespace_run_start(std::string_view text, size_t end) {
  size_t start = end;
  while (start > 0) {
    size_t p = start - 1;
    while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
    size_t q = p;
    if (!is_white_space(utf8::decode_valid(text, &q))) break;
    start = p;
  }
  return start;
}

size_t whitespace_run_end(std::string_view text, size_t start) {
  size_t end = start;
  while (end < text.size()) {
    size_t q = end;
    if (!is_white_space(utf8::decode_valid(text, &q))) break;
    end = q;
  }
  return end;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
  nodes_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = tokens_[t].content;
    if (s.empty()) continue;
    first_byte_[static_cast<unsigned char>(s[0])] = true;
    int32_t node = 0;
    for (char ch : s) {
      auto b = static_cast<uint8_t>(ch);
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& kids = nodes_[node].children;
        kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1})),
                    {b, next});
      }
      node = next;
    }
    nodes_[node].token = static_cast<int32_t>(t);  // a duplicate content keeps the last entry
  }
}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  const auto& kids = nodes_[node].children;
  auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(byte, int32_t{-1}));
  return (it != kids.end() && it->first == byte) ? it->second : -1;
}

std::vector<AddedTokenMatcher::Match> AddedTokenMatcher::find_all(std::string_view text) const {
  std::vector<Match> out;
  if (tokens_.empty()) return out;
  size_t consumed = 0;  // end of the previous match, strip widening included
  for (size_t i = 0; i < text.size();) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    int32_t node = 0, best = -1;
    size_t best_end = i;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[best];
    size_t start = i, end = best_end;
    if (tok.lstrip) start = std::max(whitespace_run_start(text, start), consumed);
    if (tok.rstrip) end = whitespace_run_end(text, end);
    out.push_back({start, end, tok.id});
    consumed = end;
    i = std::max(best_end, end);
  }
  return out;
}

}  // namespace kite
