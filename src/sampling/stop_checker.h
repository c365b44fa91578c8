// StopChecker: decides when one request's generation ends and which text may be shown.
//
// Fed one token at a time with the text that token decoded to (the detokenizer's
// incremental, UTF-8-complete delta; it may be empty). It
// - ends on EOS (unless ignore_eos) or a stop token id: finish "stop"; that token's own
//   text is dropped (as vLLM does),
// - ends on a stop string, even one spread over several deltas: finish "stop"; the stop
//   string and everything after it are dropped,
// - ends after max_tokens tokens: finish "length" (a stop token or stop string on that
//   same token wins and gives "stop"),
// - holds back the longest suffix of the text that could still grow into a stop string,
//   so a streamed output never shows part of a stop string that is later removed. The
//   held text is released as soon as it can no longer match, or when generation ends.
//
// Matching is on bytes of valid UTF-8 (validate() guarantees the stop strings are), so the
// cut points are always character boundaries. When several stop strings match, the one
// that completes first in the text wins (ties: the longer one), which makes the result
// independent of how the text was split into deltas.
//
// Invariant: the concatenation of every returned `text` is the output text up to the
// first stop string (or the whole text, for EOS/stop-token/length finishes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/sampling_params.h"

namespace kite {

enum class FinishReason { kStop, kLength };

// The OpenAI spelling: "stop" or "length".
std::string_view finish_reason_name(FinishReason reason);

struct StopUpdate {
  std::string text;                           // safe to emit now; may be empty
  std::optional<FinishReason> finish_reason;  // set on the update that ends generation
  // What ended a "stop" finish (vLLM's stop_reason); both unset for EOS and "length".
  std::optional<std::string> stop_string;
  std::optional<int32_t> stop_token_id;
};

class StopChecker {
 public:
  // `params` must be validated. `eos_token_ids`: the model's EOS ids (generation_config
  // may list several).
  StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids);

  // Adds the next generated token and its text delta. After generation has finished,
  // further calls change nothing and return an empty update.
  StopUpdate append(int32_t token_id, std::string_view text_delta);

  // Ends generation for a reason outside the checker (context window full -> kLength,
  // or an abort) and releases the held-back text. Empty update if already finished.
  StopUpdate finish(FinishReason reason);

  bool finished() const { return finished_; }
  int32_t num_output_tokens() const { return num_output_tokens_; }
  // Bytes currently held back (a possible stop-string prefix); for tests and metrics.
  size_t num_held_bytes() const { return held_.size(); }

 private:
  // Length of the longest suffix of `text` that is a proper prefix of some stop string.
  size_t hold_back_length(std::string_view text) const;

  std::vector<std::string> stop_strings_;
  std::vector<int32_t> stop_token_ids_;
  std::vector<int32_t> eos_token_ids_;  // empty when ignore_eos
  std::optional<int32_t> max_tokens_;

  std::string held_;
  int32_t num_output_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace kite
