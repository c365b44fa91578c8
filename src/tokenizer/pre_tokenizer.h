// The pre-tokenizer of a byte-level BPE tokenizer.json: splits normalized text into the pieces
// BPE runs on. Supported steps: Split (regex or literal, every HF split behaviour, invert),
// Digits, and a final ByteLevel (add_prefix_space, use_regex). ByteLevel's byte-to-character
// mapping is not applied here: pieces stay raw UTF-8 bytes and the BPE vocabulary is keyed by
// raw bytes, which is equivalent because the mapping is a bijection.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace kite {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // Builds from tokenizer.json's "pre_tokenizer" value. The chain must end in ByteLevel (kite
  // only runs byte-level BPE); anything else is kUnsupported, naming the step.
  static Result<PreTokenizer> from_json(const nlohmann::json& config);

  // Calls fn(piece) for each non-empty piece of `text` (valid UTF-8), in order. A piece views
  // `text` or an internal buffer (ByteLevel's add_prefix_space) that lives until the call ends.
  template <typename F>
  void for_each_piece(std::string_view text, F&& fn) const {
    using Fn = std::remove_reference_t<F>;
    for_each_piece_impl(
        text, [](void* ctx, std::string_view piece) { (*static_cast<Fn*>(ctx))(piece); }, &fn);
  }

  // The pieces of `text` as strings (for tests and tools; encode uses for_each_piece).
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Step {
    Regex regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };
  using PieceFn = void (*)(void* ctx, std::string_view piece);

  void for_each_piece_impl(std::string_view text, PieceFn fn, void* ctx) const;

  std::vector<Step> steps_;
  bool add_prefix_space_ = false;
};

}  // namespace kite
