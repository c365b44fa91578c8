// Added tokens (tokenizer.json "added_tokens"): strings matched in the input before
// pre-tokenization and emitted as single ids, like HF's AddedVocabulary. Matching is
// leftmost-longest over all tokens of one group (HF uses an Aho-Corasick automaton with the same
// semantics); lstrip/rstrip widen a match over adjacent whitespace.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kite {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;     // skipped by decode(skip_special_tokens=true)
  bool lstrip = false;      // the match also swallows whitespace on its left
  bool rstrip = false;      // ... and on its right
  bool normalized = false;  // matched in normalized text (else in the raw input)
};

// One byte-trie over a group of added tokens.
class AddedTokenMatcher {
 public:
  struct Match {
    size_t start, end;  // byte range in the searched text, strip widening included
    int32_t id;
  };

  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  bool empty() const { return tokens_.empty(); }

  // Non-overlapping leftmost-longest matches in `text`, left to right.
  std::vector<Match> find_all(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                 // index into tokens_ if one ends here
  };
  int32_t child(int32_t node, uint8_t byte) const;

  std::vector<Node> nodes_;
  std::vector<AddedToken> tokens_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace kite
