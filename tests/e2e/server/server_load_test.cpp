// `kite serve` under concurrency and client failure: many simultaneous SSE streams all
// complete, a client that hangs up mid-request gets its engine request aborted (KV usage back
// to zero on /metrics), and /metrics passes `promtool check metrics`.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "server_test_util.h"

namespace kite::testing {
namespace {

class ServerLoad : public ServerSuite<ServerLoad> {
 public:
  static std::vector<std::string> server_args() {
    return {"--kv-cache-memory", "64", "--max-num-seqs", "256"};
  }
};

// How many streams SimultaneousStreamsAllComplete opens ($KITE_SERVER_TEST_STREAMS, default 200).
int num_streams() {
  const char* env = std::getenv("KITE_SERVER_TEST_STREAMS");
  return env ? std::atoi(env) : 200;
}

TEST_F(ServerLoad, SimultaneousStreamsAllComplete) {
  const int n = num_streams();
  constexpr int kTokens = 8;
  std::atomic<int> connected{0}, completed{0};
  std::vector<std::string> failures(n);
  std::vector<std::thread> clients;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      Connection c(port(), std::chrono::seconds(120));
      if (!c.connected()) {
        failures[i] = "connect failed";
        return;
      }
      // Every client is connected before any sends, so the requests really overlap.
      ++connected;
      while (connected.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      Json req = {{"prompt", "Story " + std::to_string(i) + ":"},
                  {"max_tokens", kTokens},
                  {"ignore_eos", true},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}},
                  {"seed", i}};
      if (!c.send_all(make_request("POST", "/v1/completions", req.dump()))) {
        failures[i] = "send failed";
        return;
      }
      HttpResult r = c.read_response();
      std::vector<std::string> events;
      if (!r.ok || r.status != 200 || !r.chunk_framing_ok || !parse_sse(r.body, &events) ||
          events.size() < 3 || events.back() != "[DONE]") {
        failures[i] = "bad stream: " + r.error + " " + r.body.substr(0, 300);
        return;
      }
      Json usage = Json::parse(events[events.size() - 2], nullptr, false);
      if (usage["usage"]["completion_tokens"] != kTokens) {
        failures[i] = "usage: " + events[events.size() - 2];
        return;
      }
      ++completed;
    });
  }
  for (auto& t : clients) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < n; ++i)
    EXPECT_TRUE(failures[i].empty()) << "client " << i << ": " << failures[i];
  EXPECT_EQ(completed.load(), n);
  std::printf("[ server ] %d simultaneous streams of %d tokens completed in %.2f s\n",
              completed.load(), kTokens, secs);
}

// Waits until /metrics shows an idle engine (nothing running or waiting, KV usage 0).
bool wait_until_idle(uint16_t port, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string m = metrics_text(port);
    if (metric_value(m, "kite_kv_cache_usage_ratio") == 0.0 &&
        metric_value(m, "kite_requests_running") == 0.0 &&
        metric_value(m, "kite_requests_waiting") == 0.0)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A request of ~1,900 tokens (about 10 s of decoding here) is started; the client hangs up
// once it is running; the engine must be idle again long before the request could have ended.
void expect_disconnect_frees_kv(uint16_t port, bool stream) {
  ASSERT_TRUE(wait_until_idle(port, std::chrono::seconds(30)));
  const std::string aborted = "kite_request_failure_total{reason=\"client_aborted\"}";
  const double aborted_before = metric_value(metrics_text(port), aborted).value_or(-1);
  Connection c(port);
  Json req = {{"prompt", "Tell me everything."},
              {"max_tokens", 1900},
              {"ignore_eos", true},
              {"stream", stream}};
  ASSERT_TRUE(c.send_all(make_request("POST", "/v1/completions", req.dump())));
  if (stream) {
    const std::string got = c.read_until("data: {\"id\"");
    ASSERT_NE(got.find("data: "), std::string::npos) << got;
  }
  // Running, holding KV blocks.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  double usage = 0;
  while (usage == 0 && std::chrono::steady_clock::now() < deadline)
    usage = metric_value(metrics_text(port), "kite_kv_cache_usage_ratio").value_or(0);
  ASSERT_GT(usage, 0);
  const auto t0 = std::chrono::steady_clock::now();
  c.close();
  EXPECT_TRUE(wait_until_idle(port, std::chrono::seconds(4))) << metrics_text(port);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(metric_value(metrics_text(port), aborted).value_or(-1), aborted_before + 1);
  std::printf("[ server ] %s request: KV released %.3f s after the client hung up\n",
              stream ? "streaming" : "non-streaming", secs);
}

TEST_F(ServerLoad, DisconnectMidStreamReleasesKvBlocks) {
  expect_disconnect_frees_kv(port(), true);
}

TEST_F(ServerLoad, DisconnectDuringNonStreamingRequestReleasesKvBlocks) {
  expect_disconnect_frees_kv(port(), false);
}

bool have_promtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

TEST_F(ServerLoad, MetricsPassPromtoolAndAreConsistent) {
  auto [status, r] = post_json(port(), "/v1/completions",
                               {{"prompt", "Metrics"}, {"max_tokens", 5}, {"ignore_eos", true}});
  ASSERT_EQ(status, 200);
  HttpResult m = http(port(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.headers["content-type"].rfind("text/plain; version=0.0.4", 0), 0u);
  const std::string& text = m.body;
  for (const char* family :
       {"kite_requests_running", "kite_requests_waiting", "kite_kv_cache_usage_ratio",
        "kite_prefix_cache_queries_total", "kite_prefix_cache_hits_total",
        "kite_prompt_tokens_total", "kite_generation_tokens_total", "kite_request_success_total",
        "kite_request_failure_total", "kite_time_to_first_token_seconds",
        "kite_time_per_output_token_seconds", "kite_e2e_request_latency_seconds"}) {
    EXPECT_NE(text.find(std::string("# HELP ") + family + " "), std::string::npos) << family;
    EXPECT_NE(text.find(std::string("# TYPE ") + family + " "), std::string::npos) << family;
  }
  EXPECT_GE(metric_value(text, "kite_generation_tokens_total").value_or(0), 5);
  for (const std::string h :
       {"kite_time_to_first_token_seconds", "kite_time_per_output_token_seconds",
        "kite_e2e_request_latency_seconds"}) {
    // Buckets are cumulative and end with +Inf == _count.
    std::istringstream in(text);
    std::string line;
    double prev = 0;
    while (std::getline(in, line)) {
      if (line.rfind(h + "_bucket{", 0) != 0) continue;
      const double v = std::stod(line.substr(line.rfind(' ') + 1));
      EXPECT_GE(v, prev) << line;
      prev = v;
    }
    EXPECT_GE(prev, 1) << h;
    EXPECT_EQ(metric_value(text, h + "_bucket{le=\"+Inf\"}"), metric_value(text, h + "_count"))
        << h;
    EXPECT_TRUE(metric_value(text, h + "_sum").has_value()) << h;
  }
  if (!have_promtool()) GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus')";
  const std::string path = ::testing::TempDir() + "kite_metrics.txt";
  std::ofstream(path) << text;
  FILE* p = popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_EQ(out, "") << out;  // no lint warnings either
}

}  // namespace
}  // namespace kite::testing
