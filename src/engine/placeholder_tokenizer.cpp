#include "engine/placeholder_tokenizer.h"

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/byte_level.h"

namespace kite {

Result<Tokenizer> placeholder_tokenizer(int64_t vocab_size) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::encode(std::string(1, static_cast<char>(b)))] = b;
  // Never produced by encoding (no merges), only decoded.
  for (int64_t id = 256; id < vocab_size; ++id)
    vocab[byte_level::encode(" t" + std::to_string(id))] = id;
  nlohmann::json tj = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return Tokenizer::from_json(tj.dump(), "", "placeholder byte tokenizer (dummy load)");
}

}  // namespace kite
