// A hand-made byte-level BPE tokenizer.json for tests that must not depend on the npm fixtures:
// id b is byte b (spelled in the GPT-2 byte alphabet), plus a few merges and added tokens.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/byte_level.h"

namespace kite::testing {

// Merged ids: "he"=256 "ll"=257 "hell"=258 "hello"=259 "Ġw"=260.
// Added: "<s>"=300 (special), "<tool>"=301 (not special, normalized), "[L]"=302 (special,
// lstrip), "[R]"=303 (special, rstrip).
inline nlohmann::json tiny_tokenizer_json() {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::encode(std::string(1, static_cast<char>(b)))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab["\xC4\xA0w"] = 260;  // "Ġw"
  json merges = json::array({"h e", "l l", "he ll", "hell o", json::array({"\xC4\xA0", "w"})});
  auto added = [](int id, const char* content, bool special, bool lstrip, bool rstrip,
                  bool normalized) {
    return json{
        {"id", id},         {"content", content},       {"special", special},  {"lstrip", lstrip},
        {"rstrip", rstrip}, {"normalized", normalized}, {"single_word", false}};
  };
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array({added(300, "<s>", true, false, false, false),
                                    added(301, "<tool>", false, false, false, true),
                                    added(302, "[L]", true, true, false, false),
                                    added(303, "[R]", true, false, true, false)})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", R"( ?\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+)"}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {300}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

}  // namespace kite::testing
