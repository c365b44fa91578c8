#include "sampling/stop_checker.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kite {
namespace {

constexpr int32_t kEos = 2;
const std::vector<int32_t> kEosIds = {kEos};
constexpr int32_t kPlain = 100;  // any token that is neither EOS nor a stop id

SamplingParams with_stops(std::vector<std::string> stops) {
  SamplingParams p;
  p.stop = std::move(stops);
  return p;
}

// Feeds `deltas` (one token each) and returns what was emitted per step.
struct FeedResult {
  std::vector<std::string> emitted;
  std::string text;  // concatenation
  std::optional<FinishReason> reason;
  std::optional<std::string> stop_string;
  std::optional<int32_t> stop_token_id;
};

FeedResult feed(StopChecker& c, const std::vector<std::string>& deltas) {
  FeedResult run;
  for (const std::string& d : deltas) {
    StopUpdate u = c.append(kPlain, d);
    run.emitted.push_back(u.text);
    run.text += u.text;
    if (u.finish_reason) {
      run.reason = u.finish_reason;
      run.stop_string = u.stop_string;
      run.stop_token_id = u.stop_token_id;
      break;
    }
  }
  return run;
}

TEST(StopChecker, StopStringSplitAcrossDeltasNeverShowsAPart) {
  StopChecker c(with_stops({"\n\nUser:"}), kEosIds);
  FeedResult r = feed(c, {"Hello", "\n", "\nUs", "er:", " never shown"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"Hello", "", "", ""}));
  EXPECT_EQ(r.text, "Hello");
  EXPECT_EQ(r.reason, FinishReason::kStop);
  EXPECT_EQ(r.stop_string, "\n\nUser:");
  EXPECT_TRUE(c.finished());
}

TEST(StopChecker, FalseStartIsReleasedOnceItCannotMatch) {
  StopChecker c(with_stops({"abc"}), kEosIds);
  FeedResult r = feed(c, {"xa", "b", "d", "ab"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"x", "", "abd", ""}));
  EXPECT_EQ(c.num_held_bytes(), 2u);
  EXPECT_FALSE(r.reason.has_value());
  // The match restarts inside text that was a candidate: "aa" + "aab" + "c!" = "aa|aabc!".
  StopChecker d(with_stops({"aabc"}), kEosIds);
  FeedResult s = feed(d, {"aa", "aab", "c!"});
  EXPECT_EQ(s.emitted, (std::vector<std::string>{"", "aa", ""}));
  EXPECT_EQ(s.text, "aa");
  EXPECT_EQ(s.stop_string, "aabc");
}

TEST(StopChecker, StopAtTheVeryStart) {
  StopChecker c(with_stops({"###"}), kEosIds);
  FeedResult r = feed(c, {"###tail"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{""}));
  EXPECT_EQ(r.reason, FinishReason::kStop);
  EXPECT_EQ(c.append(kPlain, "more").text, "");  // finished: nothing changes
  EXPECT_EQ(c.num_output_tokens(), 1);
}

TEST(StopChecker, FirstCompletedOfSeveralStopStringsWins) {
  // "bc" completes (at byte 4) before "abcd" (at byte 5), whatever the delta split.
  for (const std::vector<std::string>& deltas :
       {std::vector<std::string>{"xabcdy"}, {"x", "a", "b", "c", "d"}, {"xab", "cd"}}) {
    StopChecker c(with_stops({"abcd", "bc"}), kEosIds);
    FeedResult r = feed(c, deltas);
    EXPECT_EQ(r.text, "xa");
    EXPECT_EQ(r.stop_string, "bc");
  }
  // Same end: the longer one wins.
  StopChecker c(with_stops({"cd", "bcd"}), kEosIds);
  FeedResult r = feed(c, {"abcde"});
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.stop_string, "bcd");
}

bool valid_utf8_boundaries(const std::string& s) {
  // Enough for the test: no piece may start with a continuation byte or end inside a char.
  if (s.empty()) return true;
  if ((static_cast<unsigned char>(s.front()) & 0xC0) == 0x80) return false;
  size_t i = s.size();
  size_t cont = 0;
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++cont;
  if (i == 0) return false;
  const auto lead = static_cast<unsigned char>(s[i - 1]);
  const size_t need = lead < 0x80 ? 0 : lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
  return need == cont;
}

TEST(StopChecker, UnicodeStopStrings) {
  StopChecker c(with_stops({"日本語", "🛑"}), kEosIds);
  FeedResult r = feed(c, {"こん", "日本", "人は", "日", "本語です"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"こん", "", "日本人は", "", ""}));
  EXPECT_EQ(r.text, "こん日本人は");
  EXPECT_EQ(r.stop_string, "日本語");

  // "€" (E2 82 AC) shares its first two bytes with "₂" (E2 82 82): no false hold-back
  // and no split character.
  StopChecker e(with_stops({"€"}), kEosIds);
  FeedResult s = feed(e, {"H₂O ", "costs 5", "€", "!"});
  EXPECT_EQ(s.emitted, (std::vector<std::string>{"H₂O ", "costs 5", ""}));
  for (const auto& piece : s.emitted) EXPECT_TRUE(valid_utf8_boundaries(piece)) << piece;

  StopChecker f(with_stops({"🛑"}), kEosIds);
  EXPECT_EQ(feed(f, {"é", "🛑"}).text, "é");
}

TEST(StopChecker, HoldBackReleasedAtLengthAndAtExternalFinish) {
  SamplingParams p = with_stops({"END"});
  p.max_tokens = 3;
  StopChecker c(p, kEosIds);
  FeedResult r = feed(c, {"a", "E", "N"});
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"a", "", "EN"}));
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_FALSE(r.stop_string.has_value());

  StopChecker d(with_stops({"END"}), kEosIds);
  feed(d, {"xE"});
  StopUpdate u = d.finish(FinishReason::kLength);  // e.g. the context window is full
  EXPECT_EQ(u.text, "E");
  EXPECT_EQ(u.finish_reason, FinishReason::kLength);
  EXPECT_EQ(d.finish(FinishReason::kStop).finish_reason, std::nullopt);
}

TEST(StopChecker, StopStringOnLastAllowedTokenIsStopNotLength) {
  SamplingParams p = with_stops({"END"});
  p.max_tokens = 2;
  StopChecker c(p, kEosIds);
  FeedResult r = feed(c, {"aE", "ND"});
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.reason, FinishReason::kStop);
}

TEST(StopChecker, EosAndStopTokensEndWithoutTheirText) {
  StopChecker c(with_stops({"</s>"}), kEosIds);
  EXPECT_EQ(c.append(kPlain, "hi <").text, "hi ");
  StopUpdate u = c.append(kEos, "<|eos|>");
  EXPECT_EQ(u.text, "<");  // held text released, EOS text dropped
  EXPECT_EQ(u.finish_reason, FinishReason::kStop);
  EXPECT_FALSE(u.stop_token_id.has_value());

  SamplingParams p;
  p.stop_token_ids = {7};
  p.max_tokens = 2;
  StopChecker d(p, kEosIds);
  EXPECT_FALSE(d.append(kPlain, "a").finish_reason.has_value());
  u = d.append(7, "<stop>");  // also the max_tokens-th token: stop wins
  EXPECT_EQ(u.text, "");
  EXPECT_EQ(u.finish_reason, FinishReason::kStop);
  EXPECT_EQ(u.stop_token_id, 7);
}

TEST(StopChecker, IgnoreEosKeepsGoingUntilLength) {
  SamplingParams p;
  p.ignore_eos = true;
  p.max_tokens = 3;
  StopChecker c(p, kEosIds);
  EXPECT_FALSE(c.append(kEos, "").finish_reason.has_value());
  EXPECT_FALSE(c.append(kEos, "x").finish_reason.has_value());
  EXPECT_EQ(c.append(kEos, "y").finish_reason, FinishReason::kLength);
  EXPECT_EQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_EQ(finish_reason_name(FinishReason::kLength), "length");
}

// Property: for random texts, stop strings and splits, the emitted text equals the text cut
// at the first-completed stop string, whatever the split; every piece is emitted once.
TEST(StopChecker, RandomSplitsGiveTheSameOutputAsOneDelta) {
  std::mt19937 rng(17);
  auto rand_str = [&](size_t max_len) {
    std::string s(1 + rng() % max_len, 'a');
    for (char& ch : s) ch = "abc"[rng() % 3];
    return s;
  };
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::string> stops = {rand_str(4), rand_str(3)};
    const std::string text = rand_str(40);
    // Reference: the smallest end over all matches, then the earliest start.
    size_t cut = text.size(), best_end = std::string::npos;
    for (const auto& s : stops) {
      size_t pos = text.find(s);
      if (pos == std::string::npos) continue;
      if (pos + s.size() < best_end || (pos + s.size() == best_end && pos < cut)) {
        best_end = pos + s.size(), cut = pos;
      }
    }
    std::vector<std::string> deltas;
    for (size_t i = 0; i < text.size();) {
      size_t len = 1 + rng() % 5;
      deltas.push_back(text.substr(i, len));
      i += len;
    }
    StopChecker c(with_stops(stops), kEosIds);
    FeedResult r = feed(c, deltas);
    std::string all = r.text;
    if (!r.reason) all += c.finish(FinishReason::kLength).text;
    ASSERT_EQ(all, text.substr(0, cut)) << text << " stops " << stops[0] << "," << stops[1];
    ASSERT_EQ(r.reason.has_value(), best_end != std::string::npos);
  }
}

}  // namespace
}  // namespace kite
