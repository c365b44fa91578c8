// Incremental parser for a text/event-stream body (the WHATWG Server-Sent Events format that
// OpenAI-compatible servers stream), fed bytes in whatever pieces the socket delivers.
//
// Lines end in "\n", "\r\n" or "\r" (a "\r\n" split across two feeds is one break). "data:"
// lines accumulate (joined by "\n"), "event:" names the event, lines starting with ":" are
// comments, other fields are ignored; an empty line dispatches the event if it has data.
// One leading space after the colon is dropped, as the spec says.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kite::bench {

struct SseEvent {
  std::string event;  // "" when no event: field was sent (i.e. "message")
  std::string data;
};

class SseParser {
 public:
  using Handler = std::function<void(const SseEvent&)>;
  explicit SseParser(Handler on_event) : on_event_(std::move(on_event)) {}

  void feed(std::string_view bytes);
  // End of stream: dispatches a last event whose blank line never came (lenient; the spec
  // would drop it, but a server that closes right after "data: [DONE]\n" still meant it).
  void finish();

 private:
  void process_line(std::string_view line);
  void dispatch();

  Handler on_event_;
  std::string line_;
  bool after_cr_ = false;  // the previous byte was '\r': a following '\n' is the same break
  bool has_data_ = false;
  SseEvent pending_;
};

}  // namespace kite::bench
