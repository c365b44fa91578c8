// libFuzzer target: the byte-level BPE tokenizer (tokenizer/tokenizer.h) of the shipped
// kite-tiny model on arbitrary bytes. The input is encoded (invalid UTF-8 included) with and
// without special tokens, and also read as token ids (any int32, out-of-vocabulary ones
// included) to decode, whole and through the incremental detokenizer. Invariants: encoded ids
// are inside the vocabulary, decoding yields valid UTF-8, streamed decoding equals whole
// decoding, and encoding plain ASCII
// (no added-token text) and decoding gives the text back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

const kite::Tokenizer& tokenizer() {
  static const kite::Tokenizer* t = [] {
    auto r = kite::Tokenizer::from_dir(KITE_SOURCE_DIR "/models/kite-tiny");
    if (!r.ok()) std::abort();
    return new kite::Tokenizer(std::move(*r));
  }();
  return *t;
}

bool plain_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e || c == '<' || c == '|') return false;  // '<', '|': added tokens
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kite::Tokenizer& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const int32_t vocab = tok.vocab_size();
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, special);
    for (int32_t id : ids)
      if (id < 0 || id >= vocab) std::abort();
    const std::string back = tok.decode(ids, false);
    if (!kite::utf8::is_valid(back)) std::abort();
    if (!special && plain_ascii(text) && back != text) std::abort();
  }
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  for (bool skip : {false, true})
    if (!kite::utf8::is_valid(tok.decode(ids, skip))) std::abort();
  // The incremental detokenizer's invariant: its deltas concatenate to decode().
  kite::IncrementalDetokenizer detok(tok, /*skip_special_tokens=*/true);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.add(id);
  streamed += detok.finish();
  if (streamed != tok.decode(ids, true)) std::abort();
  return 0;
}
