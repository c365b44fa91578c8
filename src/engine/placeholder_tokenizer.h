// The tokenizer of a dummy load (--load-format dummy) of a folder with no tokenizer.json.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace kite {

// A byte-level BPE tokenizer without merges: text encodes to ids 0-255 (its raw bytes), so
// text prompts and token-id prompts both work; ids 256 to vocab_size - 1 decode to " t<id>"
// (dummy outputs are noise, but each token must still reach a client as text: a serving
// benchmark counts the streamed chunks, and an id that decoded to nothing streamed none).
Result<Tokenizer> placeholder_tokenizer(int64_t vocab_size);

}  // namespace kite
