// `kite serve` on the shipped model, over loopback, checked at the byte level: SSE framing,
// chunked transfer, the OpenAI response shapes, streaming == non-streaming for greedy
// decoding, logprobs, n / seed / stop, the utility endpoints and keep-alive.
#include <chrono>
#include <set>

#include "server_test_util.h"

namespace kite::testing {
namespace {

class ServerApi : public ServerSuite<ServerApi> {
 public:
  static std::vector<std::string> server_args() {
    return {"--kv-cache-memory", "64", "--max-request-body-bytes", "65536"};
  }
};

// Runs a streaming request; checks HTTP + chunk + SSE framing and returns the JSON events
// (without the final [DONE]).
std::vector<Json> stream_events(uint16_t port, const std::string& path, Json body) {
  body["stream"] = true;
  HttpResult r = http(port, "POST", path, body.dump());
  std::vector<Json> events;
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.chunked);
  EXPECT_TRUE(r.chunk_framing_ok);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  std::vector<std::string> payloads;
  EXPECT_TRUE(parse_sse(r.body, &payloads)) << r.body;
  EXPECT_GE(payloads.size(), 2u);
  if (payloads.empty()) return events;
  EXPECT_EQ(payloads.back(), "[DONE]");
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    events.push_back(Json::parse(payloads[i], nullptr, false));
    EXPECT_TRUE(events.back().is_object()) << payloads[i];
  }
  return events;
}

TEST_F(ServerApi, CompletionStreamFramingAndTextMatchNonStreaming) {
  Json req = {{"model", "kite-tiny"},
              {"prompt", "The kernel"},
              {"max_tokens", 12},
              {"temperature", 0},
              {"ignore_eos", true}};
  auto [status, whole] = post_json(port(), "/v1/completions", req);
  ASSERT_EQ(status, 200) << whole.dump();
  EXPECT_EQ(whole["object"], "text_completion");
  EXPECT_EQ(whole["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(whole["model"], "kite-tiny");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(whole["usage"]["completion_tokens"], 12);
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  EXPECT_NEAR(whole["created"].get<double>(), static_cast<double>(now), 60.0);

  req["stream_options"] = {{"include_usage", true}};
  std::vector<Json> events = stream_events(port(), "/v1/completions", req);
  ASSERT_GE(events.size(), 2u);
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json& e = events[i];
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_EQ(e["id"], events[0]["id"]);
    EXPECT_TRUE(e.contains("usage") && e["usage"].is_null());
    ASSERT_EQ(e["choices"].size(), 1u);
    text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(text, whole["choices"][0]["text"].get<std::string>());
  const Json& last = events.back();  // the usage chunk: no choices
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], 12);
  EXPECT_EQ(last["usage"]["prompt_tokens"], whole["usage"]["prompt_tokens"]);
  EXPECT_EQ(last["usage"]["total_tokens"], last["usage"]["prompt_tokens"].get<int>() + 12);
  EXPECT_TRUE(last["usage"]["prompt_tokens_details"]["cached_tokens"].is_number_integer());
}

TEST_F(ServerApi, ChatStreamDeltasMatchNonStreaming) {
  Json req = {
      {"model", "kite-tiny"},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello"}}}},
      {"max_completion_tokens", 10},
      {"temperature", 0},
      {"ignore_eos", true}};
  auto [status, whole] = post_json(port(), "/v1/chat/completions", req);
  ASSERT_EQ(status, 200) << whole.dump();
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(whole["usage"]["completion_tokens"], 10);
  // The prompt is the chat template's rendering: the same count /tokenize reports.
  auto [ts, tok] = post_json(port(), "/tokenize", {{"messages", req["messages"]}});
  ASSERT_EQ(ts, 200);
  EXPECT_EQ(whole["usage"]["prompt_tokens"], tok["count"]);

  std::vector<Json> events = stream_events(port(), "/v1/chat/completions", req);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (const Json& e : events) {
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_FALSE(e.contains("usage"));  // only with stream_options.include_usage
    const Json& d = e["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(content, whole["choices"][0]["message"]["content"].get<std::string>());
}

TEST_F(ServerApi, LogprobsHaveOpenAIShapes) {
  Json chat = {{"messages", {{{"role", "user"}, {"content", "Name a color"}}}},
               {"max_tokens", 6},
               {"temperature", 0},
               {"logprobs", true},
               {"top_logprobs", 3},
               {"ignore_eos", true}};
  auto [status, r] = post_json(port(), "/v1/chat/completions", chat);
  ASSERT_EQ(status, 200) << r.dump();
  const Json& content = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u);
  for (const Json& t : content) {
    ASSERT_TRUE(t["token"].is_string() && t["logprob"].is_number() && t["bytes"].is_array());
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    for (const Json& b : t["bytes"]) EXPECT_TRUE(b.get<int>() >= 0 && b.get<int>() < 256);
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one, listed first.
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);
    EXPECT_DOUBLE_EQ(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>());
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(),
              t["top_logprobs"][2]["logprob"].get<double>());
  }

  Json comp = {{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"logprobs", 2},
               {"temperature", 0.8},           {"seed", 3},       {"ignore_eos", true}};
  auto [cs, c] = post_json(port(), "/v1/completions", comp);
  ASSERT_EQ(cs, 200) << c.dump();
  const Json& lp = c["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u);
  ASSERT_EQ(lp["token_logprobs"].size(), 5u);
  ASSERT_EQ(lp["top_logprobs"].size(), 5u);
  ASSERT_EQ(lp["text_offset"].size(), 5u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t i = 0; i < 5; ++i) {
    const std::string tok = lp["tokens"][i];
    EXPECT_LE(lp["top_logprobs"][i].size(), 3u);  // up to logprobs + the sampled token
    ASSERT_TRUE(lp["top_logprobs"][i].contains(tok));
    EXPECT_DOUBLE_EQ(lp["top_logprobs"][i][tok].get<double>(),
                     lp["token_logprobs"][i].get<double>());
    if (i > 0) {
      EXPECT_GE(lp["text_offset"][i].get<int>(), lp["text_offset"][i - 1].get<int>());
    }
  }
}

TEST_F(ServerApi, FanOutSeedAndStop) {
  Json req = {{"prompt", "In the beginning"}, {"max_tokens", 12},  {"n", 3}, {"seed", 1234},
              {"temperature", 1.0},           {"ignore_eos", true}};
  auto [s1, a] = post_json(port(), "/v1/completions", req);
  auto [s2, b] = post_json(port(), "/v1/completions", req);
  ASSERT_EQ(s1, 200) << a.dump();
  ASSERT_EQ(s2, 200) << b.dump();
  ASSERT_EQ(a["choices"].size(), 3u);
  std::set<std::string> distinct;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a["choices"][i]["index"], i);
    EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]) << "same seed, choice " << i;
    distinct.insert(a["choices"][i]["text"].get<std::string>());
  }
  EXPECT_GT(distinct.size(), 1u) << "choice i uses seed + i";
  EXPECT_EQ(a["usage"]["completion_tokens"], 36);

  // A stop string taken from the greedy continuation cuts it right before its first match.
  Json greedy = {
      {"prompt", "The kernel"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  auto [gs, g] = post_json(port(), "/v1/completions", greedy);
  ASSERT_EQ(gs, 200);
  const std::string text = g["choices"][0]["text"];
  ASSERT_GE(text.size(), 12u) << text;
  const std::string stop = text.substr(text.size() / 2, 3);
  greedy["stop"] = Json::array({"\x01never", stop});
  auto [ss, st] = post_json(port(), "/v1/completions", greedy);
  ASSERT_EQ(ss, 200) << st.dump();
  EXPECT_EQ(st["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(st["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerApi, PromptAsTokenIdsAndArrays) {
  auto [ts, tok] = post_json(port(), "/tokenize", {{"prompt", "The kernel"}});
  ASSERT_EQ(ts, 200);
  EXPECT_EQ(tok["count"], tok["tokens"].size());
  EXPECT_EQ(tok["max_model_len"], 2048);
  auto [ds, detok] = post_json(port(), "/detokenize", {{"tokens", tok["tokens"]}});
  ASSERT_EQ(ds, 200);
  EXPECT_NE(detok["prompt"].get<std::string>().find("The kernel"), std::string::npos);

  Json base = {{"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}};
  Json by_text = base, by_ids = base, many = base;
  by_text["prompt"] = "The kernel";
  by_ids["prompt"] = tok["tokens"];
  many["prompt"] = Json::array({"The kernel", tok["tokens"]});
  many["n"] = 2;
  auto [s1, a] = post_json(port(), "/v1/completions", by_text);
  auto [s2, b] = post_json(port(), "/v1/completions", by_ids);
  auto [s3, c] = post_json(port(), "/v1/completions", many);
  ASSERT_EQ(s1, 200);
  ASSERT_EQ(s2, 200);
  ASSERT_EQ(s3, 200) << c.dump();
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  ASSERT_EQ(c["choices"].size(), 4u);  // index = prompt * n + i
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(c["choices"][i]["text"], a["choices"][0]["text"]);
  EXPECT_EQ(c["usage"]["prompt_tokens"], 2 * a["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(c["usage"]["completion_tokens"], 16);
}

TEST_F(ServerApi, RepeatedPromptReportsCachedTokens) {
  // A unique ~60-token prompt: the first request fills the prefix cache, the second hits it.
  std::string prompt =
      "Cache probe " + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  for (int i = 0; i < 12; ++i) prompt += " alpha beta gamma delta";
  const Json req = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
  const std::string hits = "kite_prefix_cache_hits_total";
  const double hits_before = metric_value(metrics_text(port()), hits).value_or(-1);
  auto [s1, first] = post_json(port(), "/v1/completions", req);
  auto [s2, second] = post_json(port(), "/v1/completions", req);
  ASSERT_EQ(s1, 200);
  ASSERT_EQ(s2, 200);
  const int prompt_tokens = second["usage"]["prompt_tokens"];
  const int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_GE(cached, 16);  // at least one full block
  EXPECT_LT(cached, prompt_tokens);
  EXPECT_GE(metric_value(metrics_text(port()), hits).value_or(-1), hits_before + cached);
}

TEST_F(ServerApi, ModelsHealthAndKeepAlive) {
  Connection c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send_all(make_request("GET", "/health", "", {}, true)));
  HttpResult h = c.read_response();
  ASSERT_TRUE(h.ok) << h.error;
  EXPECT_EQ(h.status, 200);
  ASSERT_TRUE(c.send_all(make_request("GET", "/v1/models", "", {}, true)));
  HttpResult m = c.read_response();
  ASSERT_TRUE(m.ok) << m.error;
  Json models = Json::parse(m.body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "kite-tiny");
  EXPECT_EQ(models["data"][0]["object"], "model");
  // A stream, then a plain request, on the same connection.
  Json req = {{"prompt", "Hi"}, {"max_tokens", 3}, {"stream", true}};
  ASSERT_TRUE(c.send_all(make_request("POST", "/v1/completions", req.dump(), {}, true)));
  HttpResult s = c.read_response();
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_TRUE(s.chunked && s.chunk_framing_ok);
  EXPECT_NE(s.body.find("data: [DONE]\n\n"), std::string::npos);
  req["stream"] = false;
  ASSERT_TRUE(c.send_all(make_request("POST", "/v1/completions", req.dump(), {}, false)));
  HttpResult p = c.read_response();
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.status, 200);
  EXPECT_EQ(Json::parse(p.body)["usage"]["completion_tokens"].get<int>() <= 3, true);
}

TEST_F(ServerApi, ErrorStatusesAndShapes) {
  HttpResult malformed = http(port(), "POST", "/v1/chat/completions", "{\"messages\": [");
  EXPECT_EQ(malformed.status, 400);
  expect_error_shape(Json::parse(malformed.body), "invalid_request_error");

  struct Case {
    std::string path;
    Json body;
    int status;
    std::string param;
  };
  std::vector<int32_t> long_prompt(2100, 7);
  const std::vector<Case> cases = {
      {"/v1/completions", {{"prompt", "x"}, {"max_tokens", "ten"}}, 400, "max_tokens"},
      {"/v1/completions", {{"prompt", "x"}, {"temperature", -0.5}}, 400, "temperature"},
      {"/v1/completions", {{"prompt", "x"}, {"top_p", 1.5}}, 400, "top_p"},
      {"/v1/completions", {{"prompt", "x"}, {"logprobs", 21}}, 400, "logprobs"},
      {"/v1/completions", {{"prompt", "x"}, {"stop", Json::array({""})}}, 400, "stop"},
      {"/v1/completions", {{"prompt", Json::object()}}, 400, "prompt"},
      {"/v1/completions", {{"prompt", long_prompt}}, 400, "prompt"},
      {"/v1/completions", {{"prompt", "x"}, {"max_tokens", 4000}}, 400, "max_tokens"},
      {"/v1/chat/completions", {{"model", "kite-tiny"}}, 400, "messages"},
      {"/v1/chat/completions", {{"messages", {{{"content", "hi"}}}}}, 400, "messages[0].role"},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"top_logprobs", 2}},
       400,
       "top_logprobs"},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"n", 0}},
       400,
       "n"},
      {"/v1/completions", {{"prompt", "x"}, {"model", "gpt-4"}}, 404, "model"},
  };
  for (const Case& c : cases) {
    auto [status, j] = post_json(port(), c.path, c.body);
    EXPECT_EQ(status, c.status) << c.body.dump() << " -> " << j.dump();
    expect_error_shape(j, c.status == 404 ? "invalid_request_error" : "invalid_request_error");
    EXPECT_EQ(j["error"]["param"], c.param) << j.dump();
  }
  auto [ls, lj] = post_json(port(), "/v1/completions", {{"prompt", long_prompt}});
  EXPECT_NE(lj["error"]["message"].get<std::string>().find("maximum context length"),
            std::string::npos);

  HttpResult route = http(port(), "GET", "/v1/nothing");
  EXPECT_EQ(route.status, 404);
  expect_error_shape(Json::parse(route.body), "not_found_error");
  HttpResult method = http(port(), "GET", "/v1/chat/completions");
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.headers["allow"], "POST");
  expect_error_shape(Json::parse(method.body), "invalid_request_error");

  // The server was started with --max-request-body-bytes 65536.
  HttpResult big = http(port(), "POST", "/v1/completions", std::string(70000, ' '));
  EXPECT_EQ(big.status, 413) << big.error;
  expect_error_shape(Json::parse(big.body, nullptr, false), "invalid_request_error");

  Connection raw(port());
  ASSERT_TRUE(raw.send_all("NOT AN HTTP REQUEST\r\n\r\n"));
  HttpResult bad = raw.read_response();
  EXPECT_EQ(bad.status, 400) << bad.error;
}

}  // namespace
}  // namespace kite::testing
