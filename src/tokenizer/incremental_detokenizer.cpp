#include "tokenizer/incremental_detokenizer.h"

#include "tokenizer/utf8.h"

namespace kite {

std::string IncrementalDetokenizer::add(int32_t id) {
  if (skip_special_tokens_ && tokenizer_->is_special(id)) return {};
  return add_bytes(tokenizer_->token_bytes(id));
}

std::string IncrementalDetokenizer::add_bytes(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  size_t run_start = 0;
  while (i < pending_.size()) {
    if (static_cast<unsigned char>(pending_[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = utf8::valid_sequence_length(pending_, i);
    if (n != 0) {
      i += n;
      continue;
    }
    // A sequence cut at the end of what we have may still be completed by the next token.
    if (utf8::is_incomplete_prefix(pending_, i)) break;
    out.append(pending_, run_start, i - run_start);
    out.append(utf8::kReplacementUtf8);
    i += utf8::maximal_subpart_length(pending_, i);
    run_start = i;
  }
  out.append(pending_, run_start, i - run_start);
  pending_.erase(0, i);
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out = utf8::to_valid_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace kite
