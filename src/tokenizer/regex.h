// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) for the pre-tokenizer.
// tokenizer.json patterns are written for Oniguruma, the engine of HF `tokenizers`; compile()
// rewrites the constructs whose meaning differs in PCRE2 (see regex.cpp). Matching is const and
// thread-safe: per-thread match state lives in thread_local storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kite {

class Regex {
 public:
  // Compiles an Oniguruma-syntax pattern as HF tokenizers would interpret it.
  static Result<Regex> compile(std::string_view onig_pattern);
  // A pattern that matches `text` literally.
  static Result<Regex> literal(std::string_view text);

  // Appends to `matches` the [start, end) byte offsets of every non-empty, non-overlapping match
  // in `text`, left to right. `text` must be valid UTF-8 (not re-checked, for speed).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  static Result<Regex> compile_pcre2(std::string pattern, uint32_t extra_options);

  std::shared_ptr<const Code> code_;
  std::string pattern_;  // the PCRE2 pattern actually compiled
};

// Rewrites an Oniguruma pattern into PCRE2 syntax with the same meaning (exposed for tests).
Result<std::string> onig_to_pcre2(std::string_view onig_pattern);

}  // namespace kite
