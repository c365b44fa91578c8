#include "bench/sse_parser.h"

namespace kite::bench {

void SseParser::feed(std::string_view bytes) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c != '\n' && c != '\r') {
      after_cr_ = false;
      continue;
    }
    if (c == '\n' && after_cr_ && i == start && line_.empty()) {
      // Second half of a "\r\n" whose "\r" ended the previous line.
      after_cr_ = false;
      start = i + 1;
      continue;
    }
    line_.append(bytes.data() + start, i - start);
    process_line(line_);
    line_.clear();
    after_cr_ = c == '\r';
    start = i + 1;
  }
  line_.append(bytes.data() + start, bytes.size() - start);
}

void SseParser::finish() {
  if (!line_.empty()) {
    process_line(line_);
    line_.clear();
  }
  dispatch();
}

void SseParser::process_line(std::string_view line) {
  if (line.empty()) {
    dispatch();
    return;
  }
  if (line.front() == ':') return;  // comment / keep-alive
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) pending_.data += '\n';
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event.assign(value);
  }
}

void SseParser::dispatch() {
  if (has_data_) on_event_(pending_);
  pending_ = SseEvent{};
  has_data_ = false;
}

}  // namespace kite::bench
