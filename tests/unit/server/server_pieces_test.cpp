// The server's small pure parts: API-key comparison, Prometheus histograms and text, the
// JSON helpers (no -inf, no invalid UTF-8 in output) and the logprobs shapes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "server/api_error.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/openai_response.h"

namespace kite::server {
namespace {

std::string random_key(std::mt19937& rng, size_t len) {
  std::string s(len, ' ');
  for (char& c : s) c = static_cast<char>(33 + rng() % 94);
  return s;
}

TEST(ServerAuth, ConstantTimeEqualMatchesOperatorEqual) {
  std::mt19937 rng(5);
  for (int i = 0; i < 500; ++i) {
    const std::string key = random_key(rng, 1 + rng() % 40);
    std::string guess = key;
    switch (rng() % 4) {
      case 0:
        break;
      case 1:
        guess[rng() % guess.size()] ^= 1 + rng() % 0x3f;
        break;
      case 2:
        guess.pop_back();
        break;
      case 3:
        guess += static_cast<char>(33 + rng() % 94);
        break;
    }
    EXPECT_EQ(constant_time_equal(guess, key), guess == key) << guess << " vs " << key;
    EXPECT_EQ(authorized("Bearer " + guess, key), guess == key);
  }
  EXPECT_TRUE(authorized("", ""));  // no key configured
  EXPECT_TRUE(authorized("anything", ""));
  EXPECT_FALSE(authorized("", "k"));
  EXPECT_FALSE(authorized("Basic k", "k"));
  EXPECT_FALSE(authorized("Bearer", "k"));
  EXPECT_TRUE(authorized("bearer k", "k"));
}

TEST(ServerMetrics, HistogramBucketsAreCumulative) {
  std::mt19937 rng(9);
  std::exponential_distribution<double> dist(3.0);
  const std::vector<double> bounds = {0.01, 0.1, 0.5, 1, 2.5};
  Histogram h(bounds);
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(dist(rng));
  values.push_back(0.1);  // exactly on a bound: counts in that bucket (le = less or equal)
  for (double v : values) h.observe(v);
  std::string text;
  h.render(text, "x_seconds", "help");
  for (size_t b = 0; b < bounds.size(); ++b) {
    const auto expect =
        std::count_if(values.begin(), values.end(), [&](double v) { return v <= bounds[b]; });
    std::ostringstream line;
    line << "x_seconds_bucket{le=\"" << fmt::format("{}", bounds[b]) << "\"} " << expect << "\n";
    EXPECT_NE(text.find(line.str()), std::string::npos) << line.str() << text;
  }
  EXPECT_NE(text.find("x_seconds_bucket{le=\"+Inf\"} 1001\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_count 1001\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE x_seconds histogram\n"), std::string::npos);
}

TEST(ServerMetrics, RenderCountsByReason) {
  Metrics m;
  m.record_success(true, 0.5, 10, 4);
  m.record_success(false, 0.7, 3, 16);
  m.record_failure(FailureReason::kQueueFull);
  m.record_failure(FailureReason::kClientAborted, 5, 2);
  m.record_failure(FailureReason::kClientAborted, 5, 1);
  sched::SchedulerStats s;
  s.num_running = 3;
  s.num_waiting = 7;
  s.kv_cache_usage = 0.25;
  s.prefix_cache_queries = 100;
  s.prefix_cache_hits = 64;
  const std::string t = m.render(s, 2);
  for (const char* line :
       {"kite_requests_running 3\n", "kite_requests_waiting 7\n",
        "kite_kv_cache_usage_ratio 0.25\n", "kite_prefix_cache_queries_total 100\n",
        "kite_prefix_cache_hits_total 64\n", "kite_prompt_tokens_total 23\n",
        "kite_generation_tokens_total 23\n",
        "kite_request_success_total{finished_reason=\"stop\"} 1\n",
        "kite_request_success_total{finished_reason=\"length\"} 1\n",
        "kite_request_failure_total{reason=\"queue_full\"} 1\n",
        "kite_request_failure_total{reason=\"client_aborted\"} 2\n",
        "kite_request_failure_total{reason=\"bad_request\"} 0\n",
        "kite_e2e_request_latency_seconds_count 2\n"})
    EXPECT_NE(t.find(line), std::string::npos) << line;
}

TEST(ServerJson, LogprobsAreAlwaysValidJsonNumbers) {
  EXPECT_EQ(json_logprob(-std::numeric_limits<float>::infinity()), kMinLogprob);
  EXPECT_EQ(json_logprob(std::numeric_limits<float>::quiet_NaN()), kMinLogprob);
  EXPECT_EQ(json_logprob(-1e30f), kMinLogprob);
  std::mt19937 rng(2);
  for (int i = 0; i < 100; ++i) {
    const float v = -static_cast<float>(rng() % 100000) / 1000.0f;
    EXPECT_EQ(json_logprob(v), v);
  }
  // Invalid UTF-8 (half a character) is replaced by one U+FFFD, never thrown on.
  const Json j = {{"token", std::string("\xe2\x82")}};
  EXPECT_EQ(dump_json(j), "{\"token\":\"\xef\xbf\xbd\"}");
  EXPECT_EQ(sse_event(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(ServerJson, ErrorShape) {
  const ApiError e = bad_request("'n' must be in [1, 128], got 0", "n");
  const Json j = Json::parse(e.to_json());
  EXPECT_EQ(j, Json::parse(R"({"error":{"message":"'n' must be in [1, 128], got 0",
      "type":"invalid_request_error","param":"n","code":null}})"));
  EXPECT_EQ(from_status(Status(ErrorCode::kResourceExhausted, "full")).status, 429);
  EXPECT_EQ(from_status(invalid_argument("bad")).status, 400);
  EXPECT_EQ(from_status(internal_error("boom")).status, 500);
  EXPECT_EQ(model_not_found("m").status, 404);
  EXPECT_EQ(unauthorized().status, 401);
  EXPECT_EQ(payload_too_large(10).status, 413);
}

TEST(ServerJson, LogprobShapesFromTheTokenizer) {
  auto tok = Tokenizer::from_dir(std::string(KITE_SOURCE_DIR) + "/models/kite-tiny");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  std::mt19937 rng(4);
  std::vector<TokenLogprobs> tokens;
  for (int i = 0; i < 30; ++i) {
    TokenLogprobs t{
        static_cast<int32_t>(3 + rng() % 16000), -static_cast<float>(rng() % 1000) / 100.0f, {}};
    t.top = {{static_cast<int32_t>(rng() % 16000), -0.5f},
             {t.token_id, t.logprob},
             {7, -std::numeric_limits<float>::infinity()}};
    tokens.push_back(t);
  }
  const Json chat = chat_logprobs(*tok, tokens);
  ASSERT_EQ(chat["content"].size(), tokens.size());
  int64_t chars = 0;
  const Json comp = completion_logprobs(*tok, tokens, &chars);
  int64_t expect_offset = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string_view bytes = tok->token_bytes(tokens[i].token_id);
    const Json& c = chat["content"][i];
    ASSERT_EQ(c["bytes"].size(), bytes.size());
    for (size_t b = 0; b < bytes.size(); ++b)
      EXPECT_EQ(c["bytes"][b], static_cast<unsigned char>(bytes[b]));
    EXPECT_EQ(c["top_logprobs"].size(), 3u);
    EXPECT_EQ(c["top_logprobs"][2]["logprob"], kMinLogprob);
    EXPECT_EQ(comp["text_offset"][i], expect_offset);
    for (char ch : bytes) expect_offset += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
    EXPECT_EQ(comp["token_logprobs"][i].get<double>(), static_cast<double>(tokens[i].logprob));
  }
  EXPECT_EQ(chars, expect_offset);
  EXPECT_NO_THROW((void)dump_json(chat));
  EXPECT_NO_THROW((void)dump_json(comp));
}

}  // namespace
}  // namespace kite::server
