// The JSON Lines protocol of `kite tokenize`: each input line is a JSON string (encode) or a JSON
// array of token ids (decode); each output line is the matching JSON array of ids or JSON
// string. Blank input lines are skipped. Kept in the library so tests can drive it directly.
#pragma once

#include <istream>
#include <ostream>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace kite {

struct TokenizeStreamOptions {
  bool decode = false;               // ids -> text instead of text -> ids
  bool add_special_tokens = false;   // encode: add BOS/EOS as the tokenizer's post-processor does
  bool skip_special_tokens = false;  // decode: drop special tokens from the text
};

// Processes `in` until EOF. On a malformed line returns kInvalidArgument naming the 1-based line
// number; lines before it have already been written.
Status run_tokenize_stream(const Tokenizer& tokenizer, std::istream& in, std::ostream& out,
                           const TokenizeStreamOptions& options);

}  // namespace kite
