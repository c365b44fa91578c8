// `kite serve` against bad and hostile input (issue 8): headers over the limit get 431, the
// request limits (messages, stop strings, n) get 400 naming the parameter, a 1M-character
// prompt gets a quick 400 while another stream keeps flowing, a client that trickles its
// request (slowloris) is cut off at the idle timeout, and a model folder with a missing or
// corrupt shard stops `kite serve` at start with the file named.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "server_test_util.h"

namespace kite::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class ServerLimits : public ServerSuite<ServerLimits> {
 public:
  static std::vector<std::string> server_args() {
    return {"--kv-cache-memory", "32", "--max-header-bytes", "4096", "--idle-timeout", "2",
            "--max-messages",    "8",  "--max-stop-strings", "3"};
  }
};

TEST_F(ServerLimits, OversizedHeadersGet431) {
  const Json req = {{"prompt", "x"}, {"max_tokens", 2}};
  HttpResult big =
      http(port(), "POST", "/v1/completions", req.dump(), {"X-Padding: " + std::string(5000, 'a')});
  EXPECT_EQ(big.status, 431) << big.error << big.body;
  expect_error_shape(Json::parse(big.body, nullptr, false), "invalid_request_error");
  // Just under the limit is fine.
  HttpResult ok =
      http(port(), "POST", "/v1/completions", req.dump(), {"X-Padding: " + std::string(3000, 'a')});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(ServerLimits, RequestLimitsGet400NamingTheParameter) {
  Json many = Json::array();
  for (int i = 0; i < 9; ++i)
    many.push_back({{"role", "user"}, {"content", "m" + std::to_string(i)}});
  Json eight = many;
  eight.erase(eight.size() - 1);
  struct Case {
    std::string path;
    Json body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", {{"messages", many}, {"max_tokens", 2}}, 400, "messages"},
      {"/v1/chat/completions", {{"messages", eight}, {"max_tokens", 2}}, 200, ""},
      {"/v1/completions", {{"prompt", "x"}, {"stop", {"a", "b", "c", "d"}}}, 400, "stop"},
      {"/v1/completions", {{"prompt", "x"}, {"stop", {"a", "b", "c"}}, {"max_tokens", 2}}, 200, ""},
      {"/v1/completions", {{"prompt", "x"}, {"stop", std::string(2000, 's')}}, 400, "stop"},
      {"/v1/completions", {{"prompt", "x"}, {"n", 129}}, 400, "n"},
      // No request field names a file: a path as the model is only an unknown model name.
      {"/v1/completions", {{"prompt", "x"}, {"model", "../../etc/passwd"}}, 404, "model"},
      {"/v1/completions", {{"prompt", Json::array({"a", "b"})}, {"n", 65}}, 400, "n"},
  };
  for (const Case& c : cases) {
    auto [status, j] = post_json(port(), c.path, c.body);
    EXPECT_EQ(status, c.status) << c.body.dump().substr(0, 200) << " -> " << j.dump();
    if (c.status != 200) {
      expect_error_shape(j, "invalid_request_error");
      EXPECT_EQ(j["error"]["param"], c.param) << j.dump();
    }
  }
}

// The whole 1M-character prompt is refused before tokenization: the answer comes back fast
// and a stream running at the same time sees no stall.
TEST_F(ServerLimits, MillionCharacterPromptIsRefusedQuicklyWhileAStreamRuns) {
  constexpr int kTokens = 64;
  Connection stream(port());
  const Json sreq = {
      {"prompt", "Flow"}, {"max_tokens", kTokens}, {"ignore_eos", true}, {"stream", true}};
  ASSERT_TRUE(stream.send_all(make_request("POST", "/v1/completions", sreq.dump())));
  ASSERT_NE(stream.read_until("data: {").find("data: {"), std::string::npos);

  std::string huge(1'000'000, 'a');
  for (size_t i = 7; i < huge.size(); i += 8) huge[i] = ' ';
  double worst = 0;
  for (int round = 0; round < 3; ++round) {
    for (const bool chat : {false, true}) {
      const Json body = chat ? Json{{"messages", {{{"role", "user"}, {"content", huge}}}}}
                             : Json{{"prompt", huge}, {"max_tokens", 4}};
      const auto t0 = Clock::now();
      auto [status, j] = post_json(port(), chat ? "/v1/chat/completions" : "/v1/completions", body);
      worst = std::max(worst, seconds_since(t0));
      EXPECT_EQ(status, 400) << j.dump().substr(0, 300);
      expect_error_shape(j, "invalid_request_error");
      EXPECT_EQ(j["error"]["code"], "context_length_exceeded") << j.dump();
      EXPECT_EQ(j["error"]["param"], chat ? "messages" : "prompt");
    }
  }
  EXPECT_LT(worst, 2.0);  // typically ~10 ms here; the bound leaves room for a loaded CI box
  HttpResult r = stream.read_response();
  ASSERT_TRUE(r.ok) << r.error;
  std::vector<std::string> events;
  ASSERT_TRUE(parse_sse(r.body, &events));
  EXPECT_EQ(events.back(), "[DONE]");
  std::printf(
      "[ server ] 1M-character prompt: 400 in at most %.3f s (6 requests) while a "
      "%d-token stream ran to completion\n",
      worst, kTokens);
}

// A slowloris client sends its request line and then one header byte every 200 ms: the
// server closes the connection at --idle-timeout (2 s) while other clients are served.
TEST_F(ServerLimits, SlowClientIsCutOffAtTheIdleTimeout) {
  Connection slow(port(), std::chrono::seconds(10));
  ASSERT_TRUE(slow.connected());
  const auto t0 = Clock::now();
  ASSERT_TRUE(slow.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));
  bool closed = false;
  const std::string trickle = "X-Slow: " + std::string(200, 'z');
  for (size_t i = 0; i < trickle.size() && !closed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // A send to a socket the server has closed fails at the latest on the second try.
    closed = !slow.send_all(std::string(1, trickle[i]));
    if (i == 3) {
      EXPECT_EQ(http(port(), "GET", "/health").status, 200);  // others are still served
    }
  }
  const double secs = seconds_since(t0);
  EXPECT_TRUE(closed);
  EXPECT_GE(secs, 1.9);
  EXPECT_LT(secs, 6.0);
  std::printf("[ server ] slowloris client disconnected after %.2f s (--idle-timeout 2)\n", secs);
}

// A copy of kite-tiny whose shard 2 is `shard2` (nullopt: missing).
fs::path broken_model(const std::string& name, const std::optional<std::string>& shard2) {
  const fs::path src = fs::path(KITE_SOURCE_DIR) / "models" / "kite-tiny";
  const fs::path dir =
      fs::temp_directory_path() / ("kite_broken_" + name + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string f = e.path().filename().string();
    if (f == "model-00002-of-00003.safetensors") continue;
    fs::create_symlink(e.path(), dir / f);
  }
  if (shard2) std::ofstream(dir / "model-00002-of-00003.safetensors", std::ios::binary) << *shard2;
  return dir;
}

TEST(ServerStart, MissingOrCorruptShardFailsAtStartNamingTheFile) {
  if (kite_binary().empty()) GTEST_SKIP() << "build/kite is not built";
  const fs::path src =
      fs::path(KITE_SOURCE_DIR) / "models/kite-tiny/model-00002-of-00003.safetensors";
  std::ifstream in(src, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  std::string garbage = head;
  for (size_t i = 0; i < garbage.size(); i += 3) garbage[i] = static_cast<char>(i * 131 + 7);
  const std::vector<std::pair<std::string, std::optional<std::string>>> cases = {
      {"missing", std::nullopt}, {"truncated", head}, {"garbage", garbage}};
  for (const auto& [name, bytes] : cases) {
    const fs::path dir = broken_model(name, bytes);
    std::string error;
    const auto t0 = Clock::now();
    auto server = ServerProcess::start({"--model", dir.string()}, &error);
    EXPECT_EQ(server, nullptr) << name;
    EXPECT_NE(error.find("exited early with status 1"), std::string::npos) << name << ": " << error;
    EXPECT_NE(error.find("model-00002-of-00003.safetensors"), std::string::npos)
        << name << ": " << error;
    std::printf("[ server ] %s shard: exit 1 in %.2f s, message: %s\n", name.c_str(),
                seconds_since(t0), error.substr(error.rfind("error")).c_str());
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace kite::testing
