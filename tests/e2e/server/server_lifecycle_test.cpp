// `kite serve` access control, admission and shutdown: 401 without the API key, 429 when the
// engine's queue is full, and SIGTERM draining (503 for new requests, the in-flight stream
// completes, exit code 0).
#include <signal.h>

#include <thread>

#include "server_test_util.h"

namespace kite::testing {
namespace {

constexpr const char* kKey = "Authorization: Bearer s3cret-key";

// One running request and one queued at most: the third concurrent request gets 429.
class ServerAuthQueue : public ServerSuite<ServerAuthQueue> {
 public:
  static std::vector<std::string> server_args() {
    return {"--kv-cache-memory", "32", "--api-key",     "s3cret-key",
            "--max-num-seqs",    "1",  "--max-waiting", "1"};
  }
};

TEST_F(ServerAuthQueue, ApiKeyIsRequiredOnApiRoutes) {
  const Json req = {{"prompt", "x"}, {"max_tokens", 2}};
  for (const std::vector<std::string>& headers :
       std::vector<std::vector<std::string>>{{},
                                             {"Authorization: Bearer wrong"},
                                             {"Authorization: Bearer s3cret-ke"},
                                             {"Authorization: Bearer s3cret-key2"},
                                             {"Authorization: s3cret-key"}}) {
    auto [status, j] = post_json(port(), "/v1/completions", req, headers);
    EXPECT_EQ(status, 401) << (headers.empty() ? "no header" : headers[0]);
    expect_error_shape(j, "authentication_error");
  }
  EXPECT_EQ(http(port(), "GET", "/v1/models").status, 401);
  EXPECT_EQ(http(port(), "POST", "/tokenize", "{\"prompt\":\"x\"}").status, 401);
  EXPECT_EQ(post_json(port(), "/v1/completions", req, {kKey}).first, 200);
  EXPECT_EQ(post_json(port(), "/v1/completions", req, {"authorization: bearer s3cret-key"}).first,
            200);
  EXPECT_EQ(http(port(), "GET", "/v1/models", "", {kKey}).status, 200);
  // Probes and scrapers need no key.
  EXPECT_EQ(http(port(), "GET", "/health").status, 200);
  EXPECT_EQ(http(port(), "GET", "/metrics").status, 200);
}

TEST_F(ServerAuthQueue, FullQueueGets429) {
  Connection busy(port()), queued(port());
  const Json long_req = {
      {"prompt", "Busy"}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}};
  ASSERT_TRUE(busy.send_all(make_request("POST", "/v1/completions", long_req.dump(), {kKey})));
  ASSERT_NE(busy.read_until("data: {").find("data: {"), std::string::npos);
  ASSERT_TRUE(queued.send_all(make_request("POST", "/v1/completions", long_req.dump(), {kKey})));
  ASSERT_NE(queued.read_until("200 OK").find("200 OK"), std::string::npos);  // accepted, waiting
  auto [status, j] =
      post_json(port(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}}, {kKey});
  EXPECT_EQ(status, 429) << j.dump();
  expect_error_shape(j, "rate_limit_error");
  busy.close();  // aborts the long requests; their slots free up within a step or two
  queued.close();
  auto until_ok = [&](const Json& body) {
    int after = 0;
    for (int i = 0; i < 200 && after != 200; ++i) {
      after = post_json(port(), "/v1/completions", body, {kKey}).first;
      if (after != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return after;
  };
  EXPECT_EQ(until_ok({{"prompt", "x"}, {"max_tokens", 2}}), 200);
  // n = 3 needs three slots: refused as a whole, and the choices already queued are withdrawn.
  auto [fan_status, fan] =
      post_json(port(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"n", 3}}, {kKey});
  EXPECT_EQ(fan_status, 429) << fan.dump();
  EXPECT_EQ(until_ok({{"prompt", "x"}, {"max_tokens", 2}}), 200);
}

TEST(ServerDrain, SigtermFinishesInFlightStreamThenExitsZero) {
  if (kite_binary().empty()) GTEST_SKIP() << "build/kite is not built";
  std::string error;
  auto server = ServerProcess::start({"--kv-cache-memory", "32"}, &error);
  ASSERT_NE(server, nullptr) << error;
  constexpr int kTokens = 400;  // ~2 s of decoding: the drain must wait for it
  Connection stream(server->port());
  const Json req = {{"prompt", "Drain"},
                    {"max_tokens", kTokens},
                    {"ignore_eos", true},
                    {"stream", true},
                    {"stream_options", {{"include_usage", true}}}};
  ASSERT_TRUE(stream.send_all(make_request("POST", "/v1/completions", req.dump())));
  ASSERT_NE(stream.read_until("data: {").find("data: {"), std::string::npos);

  kill(server->pid(), SIGTERM);
  int health = 0;
  for (int i = 0; i < 200 && health != 503; ++i) {
    health = http(server->port(), "GET", "/health").status;
    if (health != 503) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(health, 503);
  auto [status, j] =
      post_json(server->port(), "/v1/completions", {{"prompt", "late"}, {"max_tokens", 2}});
  EXPECT_EQ(status, 503);
  expect_error_shape(j, "service_unavailable");

  HttpResult r = stream.read_response();
  ASSERT_TRUE(r.ok) << r.error;
  std::vector<std::string> events;
  ASSERT_TRUE(parse_sse(r.body, &events));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(Json::parse(events[events.size() - 2])["usage"]["completion_tokens"], kTokens);
  const std::optional<int> code = server->signal_and_wait(0, std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value()) << server->log();
  EXPECT_EQ(*code, 0) << server->log();
}

}  // namespace
}  // namespace kite::testing
