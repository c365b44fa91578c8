// Request parsing: random valid parameter sets land in SamplingParams unchanged; each kind of
// wrong input is a 400 that names its parameter.
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <random>

namespace kite::server {
namespace {

using Json = nlohmann::json;

std::optional<ApiError> parse(ApiKind kind, const Json& body, GenerationRequest* out) {
  return parse_generation_request(kind, body.dump(), out);
}

TEST(OpenAIRequest, RandomValidParametersRoundTrip) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(0.01f, 1.0f);
  for (int iter = 0; iter < 200; ++iter) {
    const float temperature = 2 * unit(rng), top_p = unit(rng), min_p = unit(rng) / 2;
    const float presence = 4 * unit(rng) - 2, frequency = 4 * unit(rng) - 2,
                repetition = 0.5f + unit(rng);
    const int top_k = static_cast<int>(rng() % 100), max_tokens = 1 + static_cast<int>(rng() % 500);
    const int64_t seed = static_cast<int64_t>(rng()) - (1 << 30);
    const int n = 1 + static_cast<int>(rng() % 4), priority = static_cast<int>(rng() % 21) - 10;
    const bool chat = rng() % 2;
    Json body = {{"temperature", temperature},
                 {"top_p", top_p},
                 {"min_p", min_p},
                 {"top_k", top_k},
                 {"presence_penalty", presence},
                 {"frequency_penalty", frequency},
                 {"repetition_penalty", repetition},
                 {"seed", seed},
                 {"n", n},
                 {"priority", priority},
                 {chat ? "max_completion_tokens" : "max_tokens", max_tokens},
                 {"stop", Json::array({"s" + std::to_string(rng() % 1000), "\n\n"})},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    if (chat)
      body["messages"] = {
          {{"role", "user"},
           {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}};
    else
      body["prompt"] = Json::array({"x", Json::array({1, 2, 3})});
    GenerationRequest g;
    auto err = parse(chat ? ApiKind::kChat : ApiKind::kCompletion, body, &g);
    ASSERT_FALSE(err) << err->message << "\n" << body.dump();
    const SamplingParams& s = g.sampling;
    EXPECT_FLOAT_EQ(s.temperature, temperature);
    EXPECT_FLOAT_EQ(s.top_p, top_p);
    EXPECT_FLOAT_EQ(s.min_p, min_p);
    EXPECT_EQ(s.top_k, top_k);
    EXPECT_FLOAT_EQ(s.presence_penalty, presence);
    EXPECT_FLOAT_EQ(s.frequency_penalty, frequency);
    EXPECT_FLOAT_EQ(s.repetition_penalty, repetition);
    EXPECT_EQ(s.seed, static_cast<uint64_t>(seed));
    EXPECT_EQ(s.max_tokens, max_tokens);
    EXPECT_EQ(s.stop, body["stop"].get<std::vector<std::string>>());
    EXPECT_EQ(g.n, n);
    EXPECT_EQ(g.priority, priority);
    EXPECT_TRUE(g.stream && g.include_usage);
    if (chat) {
      EXPECT_EQ(g.messages[0]["content"], "ab");  // text parts joined
    } else {
      ASSERT_EQ(g.prompts.size(), 2u);
      EXPECT_EQ(*g.prompts[0].text, "x");
      EXPECT_EQ(g.prompts[1].token_ids, (std::vector<int32_t>{1, 2, 3}));
    }
  }
}

TEST(OpenAIRequest, Defaults) {
  GenerationRequest c, k;
  ASSERT_FALSE(parse(ApiKind::kCompletion, {{"prompt", "x"}}, &c));
  EXPECT_EQ(c.sampling.max_tokens, 16);  // the OpenAI completions default
  ASSERT_FALSE(parse(ApiKind::kChat, {{"messages", {{{"role", "user"}, {"content", "x"}}}}}, &k));
  EXPECT_FALSE(k.sampling.max_tokens.has_value());  // the rest of the context
  EXPECT_EQ(k.n, 1);
  EXPECT_FALSE(k.stream);
  EXPECT_FALSE(k.model.has_value());
}

TEST(OpenAIRequest, LogprobsShapesDifferByEndpoint) {
  GenerationRequest c, k;
  ASSERT_FALSE(parse(ApiKind::kCompletion, {{"prompt", "x"}, {"logprobs", 3}}, &c));
  EXPECT_TRUE(c.sampling.logprobs);
  EXPECT_EQ(c.sampling.top_logprobs, 3);
  ASSERT_FALSE(parse(ApiKind::kChat,
                     {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                      {"logprobs", true},
                      {"top_logprobs", 5}},
                     &k));
  EXPECT_TRUE(k.sampling.logprobs);
  EXPECT_EQ(k.sampling.top_logprobs, 5);
}

TEST(OpenAIRequest, ErrorsNameTheParameter) {
  const Json msgs = {{{"role", "user"}, {"content", "x"}}};
  struct Case {
    ApiKind kind;
    Json body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {ApiKind::kCompletion, {{"prompt", "x"}, {"temperature", "hot"}}, "temperature"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"temperature", -1}}, "temperature"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"top_p", 0}}, "top_p"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"min_p", 2}}, "min_p"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"top_k", -2}}, "top_k"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"max_tokens", 1.5}}, "max_tokens"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"n", 200}}, "n"},
      {ApiKind::kCompletion, {{"prompt", Json::array({"a", "b", "c"})}, {"n", 50}}, "n"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"stop", 5}}, "stop"},
      {ApiKind::kCompletion,
       {{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}},
       "stream_options"},
      {ApiKind::kCompletion,
       {{"prompt", "x"}, {"stream", true}, {"stream_options", {{"include_usage", 1}}}},
       "stream_options.include_usage"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"logprobs", true}}, "logprobs"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"echo", true}}, "echo"},
      {ApiKind::kCompletion, {{"prompt", Json::array()}}, "prompt"},
      {ApiKind::kCompletion, {{"prompt", Json::array({-1})}}, "prompt"},
      {ApiKind::kCompletion, {{"prompt", Json::array({"a", Json::array()})}}, "prompt[1]"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"model", 3}}, "model"},
      {ApiKind::kCompletion, {{"prompt", "x"}, {"presence_penalty", 3}}, "presence_penalty"},
      {ApiKind::kChat, {{"messages", "hi"}}, "messages"},
      {ApiKind::kChat, {{"messages", Json::array({5})}}, "messages[0]"},
      {ApiKind::kChat, {{"messages", {{{"role", "user"}, {"content", 7}}}}}, "messages[0].content"},
      {ApiKind::kChat,
       {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}},
       "messages[0].content[0].type"},
      {ApiKind::kChat, {{"messages", msgs}, {"logprobs", 2}}, "logprobs"},
      {ApiKind::kChat, {{"messages", msgs}, {"top_logprobs", 3}}, "top_logprobs"},
      {ApiKind::kChat,
       {{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 21}},
       "top_logprobs"},
  };
  for (const Case& c : cases) {
    GenerationRequest g;
    auto err = parse(c.kind, c.body, &g);
    ASSERT_TRUE(err.has_value()) << c.body.dump();
    EXPECT_EQ(err->status, 400) << c.body.dump();
    EXPECT_EQ(err->param.value_or("<none>"), c.param) << c.body.dump() << ": " << err->message;
    EXPECT_FALSE(err->message.empty());
  }
  GenerationRequest g;
  for (const char* body : {"", "{", "[1,2]", "\"text\"", "{\"prompt\": \"x\",}"}) {
    auto err = parse_generation_request(ApiKind::kCompletion, body, &g);
    ASSERT_TRUE(err.has_value()) << body;
    EXPECT_EQ(err->status, 400);
    EXPECT_FALSE(err->param.has_value());
  }
}

}  // namespace
}  // namespace kite::server

namespace kite::server {
namespace {

// Each limit of RequestLimits, at random sizes: exactly at the limit is accepted, one over is
// a 400 naming the parameter.
TEST(OpenAIRequest, RequestLimitsAcceptAtTheLimitAndRefuseOneOver) {
  std::mt19937 rng(8);
  for (int trial = 0; trial < 20; ++trial) {
    RequestLimits limits;
    limits.max_messages = 1 + rng() % 40;
    limits.max_stop_strings = 1 + rng() % 10;
    limits.max_stop_bytes = 1 + rng() % 64;
    limits.max_stop_token_ids = 1 + rng() % 50;
    limits.max_choices = 1 + rng() % 16;
    auto check = [&](ApiKind kind, const Json& body, const char* param, bool over) {
      GenerationRequest g;
      auto e = parse_generation_request(kind, body.dump(), &g, limits);
      if (!over) {
        EXPECT_FALSE(e.has_value()) << body.dump() << " -> " << e->message;
        return;
      }
      ASSERT_TRUE(e.has_value()) << body.dump();
      EXPECT_EQ(e->status, 400);
      EXPECT_EQ(e->param, param) << e->message;
    };
    for (bool over : {false, true}) {
      Json msgs = Json::array();
      for (size_t i = 0; i < limits.max_messages + over; ++i)
        msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "m"}});
      check(ApiKind::kChat, {{"messages", msgs}}, "messages", over);
      Json stops = Json::array();
      for (size_t i = 0; i < limits.max_stop_strings + over; ++i)
        stops.push_back("s" + std::to_string(i));
      check(ApiKind::kCompletion, {{"prompt", "x"}, {"stop", stops}}, "stop", over);
      check(ApiKind::kCompletion,
            {{"prompt", "x"}, {"stop", std::string(limits.max_stop_bytes + over, 'q')}}, "stop",
            over);
      check(ApiKind::kCompletion,
            {{"prompt", "x"},
             {"stop_token_ids", std::vector<int>(limits.max_stop_token_ids + over, 3)}},
            "stop_token_ids", over);
      check(ApiKind::kCompletion, {{"prompt", "x"}, {"n", limits.max_choices + over}}, "n", over);
    }
  }
}

}  // namespace
}  // namespace kite::server
