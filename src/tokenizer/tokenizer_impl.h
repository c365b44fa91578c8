// Internal state of a loaded Tokenizer, shared by tokenizer_loader.cpp (builds it) and
// tokenizer.cpp (runs it). Not part of the public API.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kite {

struct Tokenizer::Impl {
  bool nfc = false;  // the normalizer: NFC or nothing (the only ones these tokenizers declare)
  PreTokenizer pre_tokenizer;
  BpeModel bpe;
  std::vector<AddedToken> added_tokens;
  std::unordered_map<std::string, int32_t> added_by_content;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized=false
  AddedTokenMatcher normalized_matcher;  // added tokens with normalized=true (content normalized)
  // Post-processing of a single sequence with add_special_tokens: prefix + ids + suffix.
  std::vector<int32_t> template_prefix;
  std::vector<int32_t> template_suffix;

  // Indexed by id, size vocab_size: what decode emits, the token's spelling, and flags.
  std::vector<std::string> id_bytes;
  std::vector<std::string> id_spelling;
  std::vector<uint8_t> id_flags;  // kPresent | kSpecial
  static constexpr uint8_t kPresent = 1, kSpecial = 2;

  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  bool clean_up_tokenization_spaces = true;

  void encode_normalized(std::string_view text, std::vector<int32_t>* ids) const;
  void encode_pre_tokens(std::string_view text, std::vector<int32_t>* ids) const;
};

}  // namespace kite
