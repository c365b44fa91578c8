#include "sampling/sampling_params.h"

#include <fmt/format.h>

#include <cmath>
#include <string_view>

namespace kite {
namespace {

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
// Stop strings must be: the StopChecker cuts text only at their first byte, and a valid
// first byte is a character boundary, so emitted text never splits a character.
bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (b0 < 0x80) {
      ++i;
      continue;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

Status check_range(const char* name, float v, float lo, float hi, bool lo_open) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  if (ok) return ok_status();
  return invalid_argument(
      fmt::format("{} must be in {}{}, {}], got {}", name, lo_open ? "(" : "[", lo, hi, v));
}

}  // namespace

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return invalid_argument(
        fmt::format("temperature must be >= 0 (0 means greedy), got {}", temperature));
  }
  if (top_k < -1) {
    return invalid_argument(
        fmt::format("top_k must be -1 or 0 (disabled) or a positive count, got {}", top_k));
  }
  KITE_RETURN_IF_ERROR(check_range("top_p", top_p, 0.0f, 1.0f, /*lo_open=*/true));
  KITE_RETURN_IF_ERROR(check_range("min_p", min_p, 0.0f, 1.0f, /*lo_open=*/false));
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f) {
    return invalid_argument(
        fmt::format("repetition_penalty must be > 0 (1 disables it), got {}", repetition_penalty));
  }
  KITE_RETURN_IF_ERROR(
      check_range("presence_penalty", presence_penalty, -2.0f, 2.0f, /*lo_open=*/false));
  KITE_RETURN_IF_ERROR(
      check_range("frequency_penalty", frequency_penalty, -2.0f, 2.0f, /*lo_open=*/false));
  if (max_tokens.has_value() && *max_tokens < 1) {
    return invalid_argument(fmt::format("max_tokens must be >= 1, got {}", *max_tokens));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) {
      return invalid_argument(fmt::format("stop[{}] is an empty string; remove it", i));
    }
    if (!is_valid_utf8(stop[i])) {
      return invalid_argument(fmt::format("stop[{}] is not valid UTF-8", i));
    }
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    if (stop_token_ids[i] < 0) {
      return invalid_argument(
          fmt::format("stop_token_ids[{}] must be a token id >= 0, got {}", i, stop_token_ids[i]));
    }
  }
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs) {
    return invalid_argument(
        fmt::format("top_logprobs must be in [0, {}], got {}", kMaxTopLogprobs, top_logprobs));
  }
  if (top_logprobs > 0 && !logprobs) {
    return invalid_argument(fmt::format("top_logprobs={} requires logprobs=true", top_logprobs));
  }
  return ok_status();
}

}  // namespace kite
