// IncrementalDetokenizer: turns a stream of generated ids into text deltas for streaming.
//
// Byte-level BPE tokens are context-free byte strings, so the text is the UTF-8 decoding of the
// concatenated token bytes. add() appends one token's bytes and returns the longest newly
// decodable text; bytes that may still become a valid character (a UTF-8 sequence cut between
// tokens) are held back, and bytes that can never be valid are replaced by U+FFFD at once.
// finish() flushes what is held (an incomplete tail becomes one U+FFFD).
//
// Invariant: add(ids[0]) + ... + add(ids[n-1]) + finish() == tokenizer.decode(ids, skip), and
// every returned delta is valid UTF-8. (clean_up_tokenization_spaces is never applied, as in
// other serving engines: it would rewrite text already streamed.)
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace kite {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Feeds one id; returns the text it completes (possibly empty).
  std::string add(int32_t id);
  // Feeds raw bytes (exposed for tests and for callers holding bytes, not ids).
  std::string add_bytes(std::string_view bytes);
  // Returns the held-back bytes as text (U+FFFD for an incomplete tail) and resets.
  std::string finish();

  // Bytes received but not yet returned as text (at most 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace kite
