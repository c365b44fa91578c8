// The SSE parser gives the same events however the byte stream is cut into pieces.
#include "bench/sse_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace kite::bench {
namespace {

std::vector<SseEvent> parse_in_pieces(const std::string& stream, const std::vector<size_t>& cuts) {
  std::vector<SseEvent> events;
  SseParser parser([&](const SseEvent& e) { events.push_back(e); });
  size_t prev = 0;
  for (size_t c : cuts) {
    parser.feed(std::string_view(stream).substr(prev, c - prev));
    prev = c;
  }
  parser.feed(std::string_view(stream).substr(prev));
  parser.finish();
  return events;
}

void expect_events(const std::vector<SseEvent>& got, const std::vector<SseEvent>& want,
                   const std::string& ctx) {
  ASSERT_EQ(got.size(), want.size()) << ctx;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].data, want[i].data) << ctx << " event " << i;
    EXPECT_EQ(got[i].event, want[i].event) << ctx << " event " << i;
  }
}

TEST(BenchSseParser, OpenAiStyleStream) {
  const std::string s =
      "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
      ": keep-alive comment\n\n"
      "data: {\"choices\":[{\"text\":\"b\\n\"}]}\n\n"
      "data: [DONE]\n\n";
  expect_events(parse_in_pieces(s, {}),
                {{"", "{\"choices\":[{\"text\":\"a\"}]}"},
                 {"", "{\"choices\":[{\"text\":\"b\\n\"}]}"},
                 {"", "[DONE]"}},
                "whole");
}

TEST(BenchSseParser, FieldsLineEndingsAndMultilineData) {
  const std::string s =
      "event: delta\r\ndata:no-space\r\ndata:  two spaces\r\nid: 7\r\n\r\n"
      "data: cr only\r\rdata\n\n"  // "data" with no colon is a data line with empty value
      "retry: 100\n\n"             // no data: not dispatched
      "data: tail without blank line\n";
  expect_events(parse_in_pieces(s, {}),
                {{"delta", "no-space\n two spaces"},
                 {"", "cr only"},
                 {"", ""},
                 {"", "tail without blank line"}},
                "whole");
}

TEST(BenchSseParser, SameEventsForEverySplit) {
  std::mt19937 rng(11);
  // A long stream mixing \n, \r\n and \r line ends, comments and multi-line data.
  std::string stream;
  std::vector<SseEvent> want;
  const char* ends[] = {"\n", "\r\n", "\r"};
  for (int i = 0; i < 60; ++i) {
    const std::string end = ends[rng() % 3];
    SseEvent e;
    e.data = "{\"i\":" + std::to_string(i) + ",\"text\":\"" + std::string(rng() % 40, 'x') + "\"}";
    if (i % 7 == 0) {
      stream += ": ping" + end;
    }
    if (i % 5 == 0) {
      stream += "data: " + e.data + end + "data: second line" + end;
      e.data += "\nsecond line";
    } else {
      stream += "data: " + e.data + end;
    }
    stream += end;
    want.push_back(e);
  }
  stream += "data: [DONE]\n\n";
  want.push_back({"", "[DONE]"});
  // Every single cut point, then many random multi-cut splits (including 1-byte pieces).
  for (size_t cut = 0; cut <= stream.size(); ++cut)
    expect_events(parse_in_pieces(stream, {cut}), want, "cut at " + std::to_string(cut));
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts;
    for (size_t p = 0; p < stream.size(); p += 1 + rng() % (trial % 4 == 0 ? 2 : 37))
      cuts.push_back(p);
    expect_events(parse_in_pieces(stream, cuts), want, "trial " + std::to_string(trial));
  }
}

}  // namespace
}  // namespace kite::bench
