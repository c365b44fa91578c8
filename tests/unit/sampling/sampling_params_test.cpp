#include "sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace kite {
namespace {

std::string error_of(const std::function<void(SamplingParams&)>& mutate) {
  SamplingParams p;
  mutate(p);
  Status s = p.validate();
  EXPECT_FALSE(s.ok());
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  return s.message();
}

TEST(SamplingParams, DefaultsAndTypicalRequestsAreValid) {
  EXPECT_TRUE(SamplingParams{}.validate().ok());
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = -1;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.max_tokens = 1;
  p.stop = {"\n\nUser:", "終わり"};
  p.stop_token_ids = {0, 128009};
  p.logprobs = true;
  p.top_logprobs = 20;
  EXPECT_TRUE(p.validate().ok()) << p.validate().message();
  EXPECT_TRUE(p.is_greedy());
}

TEST(SamplingParams, MessagesNameFieldRangeAndValue) {
  EXPECT_EQ(error_of([](auto& p) { p.top_p = 1.5f; }), "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(error_of([](auto& p) { p.top_p = 0.0f; }), "top_p must be in (0, 1], got 0");
  EXPECT_EQ(error_of([](auto& p) { p.min_p = -0.25f; }), "min_p must be in [0, 1], got -0.25");
  EXPECT_EQ(error_of([](auto& p) { p.presence_penalty = 2.5f; }),
            "presence_penalty must be in [-2, 2], got 2.5");
  EXPECT_EQ(error_of([](auto& p) { p.frequency_penalty = -3.0f; }),
            "frequency_penalty must be in [-2, 2], got -3");
  EXPECT_EQ(error_of([](auto& p) { p.temperature = -0.5f; }),
            "temperature must be >= 0 (0 means greedy), got -0.5");
  EXPECT_EQ(error_of([](auto& p) { p.top_k = -2; }),
            "top_k must be -1 or 0 (disabled) or a positive count, got -2");
  EXPECT_EQ(error_of([](auto& p) { p.repetition_penalty = 0.0f; }),
            "repetition_penalty must be > 0 (1 disables it), got 0");
  EXPECT_EQ(error_of([](auto& p) { p.max_tokens = 0; }), "max_tokens must be >= 1, got 0");
  EXPECT_EQ(error_of([](auto& p) { p.top_logprobs = 21; }),
            "top_logprobs must be in [0, 20], got 21");
  EXPECT_EQ(error_of([](auto& p) { p.top_logprobs = 3; }), "top_logprobs=3 requires logprobs=true");
  EXPECT_EQ(error_of([](auto& p) {
              p.stop = {"ok", ""};
            }),
            "stop[1] is an empty string; remove it");
  EXPECT_EQ(error_of([](auto& p) {
              p.stop_token_ids = {5, -1};
            }),
            "stop_token_ids[1] must be a token id >= 0, got -1");
}

TEST(SamplingParams, RejectsNonFiniteFloats) {
  EXPECT_NE(error_of([](auto& p) { p.temperature = NAN; }).find("temperature"), std::string::npos);
  EXPECT_NE(error_of([](auto& p) { p.top_p = NAN; }).find("top_p"), std::string::npos);
  EXPECT_NE(error_of([](auto& p) { p.min_p = INFINITY; }).find("min_p"), std::string::npos);
  EXPECT_NE(error_of([](auto& p) { p.repetition_penalty = INFINITY; }).find("repetition"),
            std::string::npos);
  EXPECT_NE(error_of([](auto& p) { p.temperature = INFINITY; }).find("temperature"),
            std::string::npos);
}

TEST(SamplingParams, StopStringsMustBeValidUtf8) {
  for (std::string bad : {std::string("\xff"), std::string("a\xc3"), std::string("\xc0\xaf"),
                          std::string("\xed\xa0\x80"), std::string("\xe2\x82")}) {
    EXPECT_EQ(error_of([&](auto& p) { p.stop = {bad}; }), "stop[0] is not valid UTF-8") << bad;
  }
  SamplingParams ok;
  ok.stop = {"é", "日本語", "🛑", "\xf4\x8f\xbf\xbf"};  // U+10FFFF is the last valid code point
  EXPECT_TRUE(ok.validate().ok());
}

}  // namespace
}  // namespace kite
