// The pre-tokenizer of a byte-level BPE tokenizer.json: splits normalized text into the pieces
// BPE runs on. Supported steps: Split (regex or literal, every HF split behaviour, invert),
// Digits, and a final ByteLevel (add_prefix_space, use_regex). ByteLevel's byte-to-character
// mapping is not applied here: pieces stay raw UTF-8 bytes and the BPE vocabulary is keyed by
// raw bytes, which is equivalent because the mapping is a bijection.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace kite {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // Builds from tokenizer.json's "pre_tokenizer" value. The chain must end in ByteLevel (kite
  // only runs byte-level BPE); anything else is kUnsupported, naming the step.
  static Result<PreTokenizer> from_json(const nlohmann::json& config);

  // Splits `text` (valid UTF-8) into non-empty pieces, appended to `pieces`. A piece views
  // either `text` or `*scratch` (used when ByteLevel's add_prefix_space prepends a space);
  // `scratch` must outlive the pieces.
  void split(std::string_view text, std::string* scratch,
             std::vector<std::string_view>* pieces) const;

 private:
  struct Step {
    Regex regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };

  // Splits each of `in` by `step` into `out`.
  static void apply_step(const Step& step, const std::vector<std::string_view>& in,
                         std::vector<std::string_view>* out);

  std::vector<Step> steps_;
  bool add_prefix_space_ = false;
};

}  // namespace kite
