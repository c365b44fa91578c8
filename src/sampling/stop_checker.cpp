#include "sampling/stop_checker.h"

#include <algorithm>

namespace kite {
namespace {

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
  }
  return "stop";
}

StopChecker::StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids)
    : stop_strings_(params.stop),
      stop_token_ids_(params.stop_token_ids),
      max_tokens_(params.max_tokens) {
  if (!params.ignore_eos) eos_token_ids_.assign(eos_token_ids.begin(), eos_token_ids.end());
}

StopUpdate StopChecker::finish(FinishReason reason) {
  StopUpdate update;
  if (finished_) return update;
  finished_ = true;
  update.text = std::move(held_);
  held_.clear();
  update.finish_reason = reason;
  return update;
}

StopUpdate StopChecker::append(int32_t token_id, std::string_view text_delta) {
  if (finished_) return {};
  ++num_output_tokens_;

  // EOS first, then stop ids (vLLM's order). The token's own text is not part of the output.
  if (contains(eos_token_ids_, token_id)) return finish(FinishReason::kStop);
  if (contains(stop_token_ids_, token_id)) {
    StopUpdate update = finish(FinishReason::kStop);
    update.stop_token_id = token_id;
    return update;
  }

  std::string text = std::move(held_);
  held_.clear();
  text.append(text_delta);

  // The match that completes first (smallest end), then the longest. The held prefix holds
  // no complete stop string (it would have ended generation), so any match is new.
  size_t best_pos = std::string::npos;
  size_t best_end = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& stop : stop_strings_) {
    const size_t pos = text.find(stop);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stop.size();
    if (best == nullptr || end < best_end || (end == best_end && pos < best_pos)) {
      best_pos = pos, best_end = end, best = &stop;
    }
  }
  if (best != nullptr) {
    StopUpdate update;
    finished_ = true;
    text.resize(best_pos);
    update.text = std::move(text);
    update.finish_reason = FinishReason::kStop;
    update.stop_string = *best;
    return update;
  }

  if (max_tokens_.has_value() && num_output_tokens_ >= *max_tokens_) {
    held_ = std::move(text);
    return finish(FinishReason::kLength);
  }

  StopUpdate update;
  const size_t hold = hold_back_length(text);
  held_.assign(text, text.size() - hold, hold);
  text.resize(text.size() - hold);
  update.text = std::move(text);
  return update;
}

size_t StopChecker::hold_back_length(std::string_view text) const {
  size_t best = 0;
  for (const std::string& stop : stop_strings_) {
    // Proper prefixes only: a full match was handled before this is called.
    for (size_t len = std::min(stop.size() - 1, text.size()); len > best; --len) {
      if (text.ends_with(std::string_view(stop).substr(0, len))) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace kite
