// Tokenizer: Hugging Face byte-level BPE tokenizers (Llama 3, Qwen2/2.5/3, DeepSeek V2/V3 and
// the like) loaded from tokenizer.json (+ tokenizer_config.json), producing the same ids and
// text as HF `tokenizers`/`transformers`.
//
// encode(text) runs, like HF: added tokens matched in the raw text -> normalizer (NFC if
// declared) -> added tokens with normalized=true matched in the normalized text ->
// pre-tokenizer (Split/Digits/ByteLevel) -> BPE per piece -> post-processor (BOS/EOS when
// add_special_tokens). decode(ids) concatenates each token's bytes and converts them to UTF-8,
// replacing invalid bytes with U+FFFD exactly as HF's ByteLevel decoder does.
//
// A Tokenizer is immutable after loading (its BPE cache is internally synchronized): copies
// share state and every method may be called from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kite {

class Tokenizer {
 public:
  // Loads `tokenizer_json_path`; tokenizer_config.json is read from the same directory when
  // present (it supplies bos/eos and the BOS rule of LlamaTokenizerFast configs).
  static Result<Tokenizer> from_file(const std::string& tokenizer_json_path);
  // Loads MODEL_DIR/tokenizer.json (+ MODEL_DIR/tokenizer_config.json); kNotFound if absent.
  static Result<Tokenizer> from_dir(const std::string& model_dir);
  // From file contents; `config_json` may be empty. `source` names them in error messages.
  static Result<Tokenizer> from_json(std::string_view tokenizer_json, std::string_view config_json,
                                     const std::string& source = "tokenizer.json");

  // Token ids of `text`. Invalid UTF-8 in `text` is first replaced by U+FFFD (HF only accepts
  // valid strings). add_special_tokens adds what the post-processor adds (e.g. BOS).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;

  // Text of `ids`, as HF tokenizers' decode (clean_up_tokenization_spaces is not applied; see
  // clean_up_tokenization()). Ids outside the vocabulary are skipped, as HF does.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // The raw bytes decode() emits for `id` (empty for unknown ids); may be invalid UTF-8 alone.
  std::string_view token_bytes(int32_t id) const;

  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  // One past the largest id of the vocabulary and added tokens.
  int32_t vocab_size() const;
  // True for added tokens marked "special" (the ones skip_special_tokens drops).
  bool is_special(int32_t id) const;
  // What tokenizer_config.json asks transformers to do after decoding (default true there).
  bool clean_up_tokenization_spaces() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// transformers' clean_up_tokenization: removes the space before . ? ! , and English
// contractions (" n't", " 's", ...), in the same order as transformers.
std::string clean_up_tokenization(std::string text);

}  // namespace kite
