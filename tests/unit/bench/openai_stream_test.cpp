// Request bodies and the streamed-response recorder (what counts as a token chunk, usage,
// errors) for both endpoints.
#include "bench/openai_stream.h"

#include <gtest/gtest.h>

namespace kite::bench {
namespace {

SseEvent data(const nlohmann::json& j) { return {"", j.dump()}; }

TEST(BenchOpenAi, CompletionsBodyWithTokenIds) {
  BenchRequest r;
  r.prompt_token_ids = {101, 202, 303};
  r.input_len = 3;
  r.output_len = 17;
  auto body = make_request_body(r, Endpoint::kCompletions, "m");
  ASSERT_TRUE(body.ok());
  EXPECT_EQ((*body)["model"], "m");
  EXPECT_EQ((*body)["prompt"], nlohmann::json({101, 202, 303}));
  EXPECT_EQ((*body)["max_tokens"], 17);
  EXPECT_EQ((*body)["stream"], true);
  EXPECT_EQ((*body)["ignore_eos"], true);
  EXPECT_EQ((*body)["stream_options"]["include_usage"], true);
  EXPECT_FALSE(make_request_body(r, Endpoint::kChat, "m").ok());  // ids cannot go to chat
}

TEST(BenchOpenAi, ChatBodyWrapsTextAndKeepsMessages) {
  BenchRequest r;
  r.prompt_text = "hello there";
  r.output_len = 5;
  auto body = make_request_body(r, Endpoint::kChat, "m");
  ASSERT_TRUE(body.ok());
  EXPECT_EQ((*body)["messages"][0]["role"], "user");
  EXPECT_EQ((*body)["messages"][0]["content"], "hello there");
  r.messages = nlohmann::json::array(
      {{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u"}}});
  body = make_request_body(r, Endpoint::kChat, "m");
  EXPECT_EQ((*body)["messages"].size(), 2u);
  EXPECT_FALSE(make_request_body(r, Endpoint::kCompletions, "m").ok());
}

TEST(BenchOpenAi, CompletionsRecorderUsesUsageAndChunkTimes) {
  StreamRecorder rec(Endpoint::kCompletions);
  rec.on_event(data({{"choices", {{{"index", 0}, {"text", "He"}, {"finish_reason", nullptr}}}}}),
               0.30);
  rec.on_event(data({{"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", nullptr}}}}}),
               0.35);  // held bytes
  rec.on_event(data({{"choices", {{{"index", 0}, {"text", "llo"}, {"finish_reason", "length"}}}}}),
               0.45);
  rec.on_event(data({{"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}}}}),
               0.46);  // not a token
  rec.on_event(data({{"choices", nlohmann::json::array()},
                     {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 4}}}}),
               0.47);
  rec.on_event({"", "[DONE]"}, 0.48);
  BenchRequest req;
  req.input_len = 99;
  RequestResult r = rec.finish(req, ok_status(), 0.50);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.30);
  EXPECT_DOUBLE_EQ(r.e2e_s, 0.48);
  EXPECT_EQ(r.num_content_chunks, 3);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.05, 1e-12);
  EXPECT_NEAR(r.itl_s[1], 0.10, 1e-12);
  EXPECT_EQ(r.output_tokens, 4);  // usage wins over the 3 chunks
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_TRUE(r.usage_reported);
  EXPECT_NEAR(r.tpot_s(), (0.48 - 0.30) / 3, 1e-12);
}

TEST(BenchOpenAi, ChatRecorderSkipsRoleAndFinishChunks) {
  StreamRecorder rec(Endpoint::kChat);
  rec.on_event(
      data({{"choices",
             {{{"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}}}}),
      0.01);
  rec.on_event(data({{"choices", {{{"delta", {{"content", "Hi"}}}, {"finish_reason", nullptr}}}}}),
               0.20);
  rec.on_event(data({{"choices",
                      {{{"delta", {{"reasoning_content", "hmm"}}}, {"finish_reason", nullptr}}}}}),
               0.25);
  rec.on_event(data({{"choices", {{{"delta", {{"content", ""}}}, {"finish_reason", nullptr}}}}}),
               0.27);
  rec.on_event(
      data({{"choices", {{{"delta", nlohmann::json::object()}, {"finish_reason", "stop"}}}}}),
      0.30);
  rec.on_event({"", "[DONE]"}, 0.31);
  BenchRequest req;
  req.input_len = 5;
  RequestResult r = rec.finish(req, ok_status(), 0.31);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.20);
  EXPECT_EQ(r.num_content_chunks, 3);
  EXPECT_FALSE(r.usage_reported);
  EXPECT_EQ(r.output_tokens, 3);  // no usage: chunks
  EXPECT_EQ(r.prompt_tokens, 5);  // no usage: the dataset's length
}

TEST(BenchOpenAi, RecorderFailures) {
  BenchRequest req;
  {
    StreamRecorder rec(Endpoint::kCompletions);
    rec.on_event(data({{"error", {{"message", "prompt too long"}, {"type", "BadRequestError"}}}}),
                 0.1);
    RequestResult r = rec.finish(req, ok_status(), 0.1);
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("prompt too long"), std::string::npos) << r.error;
  }
  {
    StreamRecorder rec(Endpoint::kCompletions);
    rec.on_event(data({{"choices", {{{"text", "x"}, {"finish_reason", nullptr}}}}}), 0.1);
    RequestResult r = rec.finish(req, ok_status(), 0.2);  // no [DONE]
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("[DONE]"), std::string::npos) << r.error;
  }
  {
    StreamRecorder rec(Endpoint::kCompletions);
    rec.on_event({"", "[DONE]"}, 0.1);
    EXPECT_NE(rec.finish(req, ok_status(), 0.1).error.find("no tokens"), std::string::npos);
  }
  {
    StreamRecorder rec(Endpoint::kCompletions);
    RequestResult r = rec.finish(req, Status(ErrorCode::kInternal, "cannot connect"), 0.0);
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error, "cannot connect");
  }
  {
    StreamRecorder rec(Endpoint::kCompletions);
    rec.on_event({"", "not json"}, 0.1);
    rec.on_event(data({{"choices", {{{"text", "x"}, {"finish_reason", nullptr}}}}}), 0.2);
    rec.on_event({"", "[DONE]"}, 0.3);
    EXPECT_NE(rec.finish(req, ok_status(), 0.3).error.find("unparseable"), std::string::npos);
  }
}

}  // namespace
}  // namespace kite::bench
