// `kite bench serve` against a fake streaming server (fake_openai_server.h): request bodies,
// measurements, concurrency cap, arrival schedule, failures, and the CLI's JSON and plot.
#include "bench/serve_bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "fake_openai_server.h"
#include "support/run_command.h"

namespace kite::bench {
namespace {

namespace fs = std::filesystem;
using kite::testing::FakeOpenAiServer;
using kite::testing::FakeServerOptions;

std::vector<BenchRequest> random_requests(int n, int input_len, int output_len, uint64_t seed = 1) {
  DatasetConfig c;
  c.num_prompts = n;
  c.input_len = input_len;
  c.output_len = output_len;
  c.seed = seed;
  auto d = build_dataset(c);
  EXPECT_TRUE(d.ok());
  return *d;
}

ServeRun run_against(FakeOpenAiServer& server, const ServeRunConfig& config,
                     const std::vector<BenchRequest>& reqs) {
  auto client = HttpClient::create(server.url());
  EXPECT_TRUE(client.ok()) << client.status().message();
  auto run = run_serve_benchmark(**client, config, reqs);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return std::move(*run);
}

TEST(BenchServe, CompletionsStreamMeasuredUnderConcurrencyCap) {
  FakeServerOptions opt;
  opt.first_token_delay_ms = 30;
  opt.token_delay_ms = 6;
  FakeOpenAiServer server(opt);
  ServeRunConfig config;
  config.model = "m1";
  config.request_rate = INFINITY;
  config.max_concurrency = 3;
  auto reqs = random_requests(9, 12, 5);
  ServeRun run = run_against(server, config, reqs);
  const ServeMetrics& m = run.metrics;
  EXPECT_EQ(m.completed, 9);
  EXPECT_EQ(m.failed, 0) << (m.first_errors.empty() ? "" : m.first_errors[0]);
  EXPECT_EQ(m.total_output_tokens, 45);
  EXPECT_EQ(m.total_input_tokens, 9 * 12);  // the server's usage.prompt_tokens
  EXPECT_LE(server.max_concurrent(), 3);
  EXPECT_GE(server.max_concurrent(), 2);
  // The server's delays bound what the client measures from below. Strictly only for
  // absolute times (a descheduled client may read two token events at once, shrinking one
  // gap and growing the next), so gaps are checked through their largest values.
  EXPECT_GE(m.ttft_ms.min, 30.0);
  EXPECT_GE(m.e2e_ms.min, 30.0 + 4 * 6.0);
  EXPECT_EQ(m.itl_ms.count, 9 * 4);
  EXPECT_GE(m.itl_ms.p90, 6.0);
  EXPECT_GE(m.tpot_ms.max, 6.0);
  // 9 requests, 3 at a time, each >= 54 ms: at least 3 rounds.
  EXPECT_GE(m.duration_s, 3 * 0.054);
  EXPECT_NEAR(m.request_throughput, 9 / m.duration_s, 1e-9);
  for (const auto& r : run.results) {
    EXPECT_TRUE(r.success) << r.error;
    EXPECT_TRUE(r.usage_reported);
    EXPECT_EQ(r.num_content_chunks, 5);
    double last_chunk_s = r.ttft_s;
    for (double gap : r.itl_s) last_chunk_s += gap;
    EXPECT_GE(last_chunk_s, 0.030 + 4 * 0.006);  // the last token left the server then
    EXPECT_LE(last_chunk_s, r.e2e_s);
    EXPECT_DOUBLE_EQ(r.tpot_s(), (r.e2e_s - r.ttft_s) / 4);
  }
  auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 9u);
  for (const auto& b : bodies) {
    EXPECT_EQ(b["model"], "m1");
    EXPECT_EQ(b["stream"], true);
    EXPECT_EQ(b["ignore_eos"], true);
    EXPECT_EQ(b["max_tokens"], 5);
    EXPECT_EQ(b["stream_options"]["include_usage"], true);
    ASSERT_TRUE(b["prompt"].is_array());
    EXPECT_EQ(b["prompt"].size(), 12u);
  }
  for (const auto& t : server.targets()) EXPECT_EQ(t, "/v1/completions");
}

TEST(BenchServe, ChatWithoutUsageCountsContentChunks) {
  FakeServerOptions opt;
  opt.send_usage = false;
  opt.first_token_delay_ms = 5;
  FakeOpenAiServer server(opt);
  DatasetConfig c;
  c.format = PromptFormat::kText;
  c.num_prompts = 4;
  c.input_len = 10;
  c.output_len = 3;
  auto reqs = build_dataset(c);
  ASSERT_TRUE(reqs.ok());
  ServeRunConfig config;
  config.model = "m";
  config.endpoint = Endpoint::kChat;
  config.request_rate = INFINITY;
  ServeRun run = run_against(server, config, *reqs);
  EXPECT_EQ(run.metrics.completed, 4);
  EXPECT_EQ(run.metrics.total_output_tokens, 12);  // role chunk not counted
  EXPECT_EQ(run.metrics.total_input_tokens, 40);   // no usage: the dataset's word count
  for (const auto& r : run.results) EXPECT_FALSE(r.usage_reported);
  for (const auto& b : server.bodies()) EXPECT_EQ(b["messages"][0]["role"], "user");
  for (const auto& t : server.targets()) EXPECT_EQ(t, "/v1/chat/completions");
}

TEST(BenchServe, FailuresAreCountedNotFatal) {
  FakeServerOptions opt;
  opt.fail_every = 3;
  opt.first_token_delay_ms = 1;
  FakeOpenAiServer server(opt);
  ServeRunConfig config;
  config.model = "m";
  config.request_rate = INFINITY;
  config.max_concurrency = 1;  // arrival order = request order, so exactly 2 of 6 fail
  ServeRun run = run_against(server, config, random_requests(6, 4, 2));
  EXPECT_EQ(run.metrics.completed, 4);
  EXPECT_EQ(run.metrics.failed, 2);
  ASSERT_FALSE(run.metrics.first_errors.empty());
  EXPECT_NE(run.metrics.first_errors[0].find("HTTP 500"), std::string::npos)
      << run.metrics.first_errors[0];
  EXPECT_NE(run.metrics.first_errors[0].find("injected failure"), std::string::npos);
}

TEST(BenchServe, RequestsLeaveOnTheArrivalSchedule) {
  FakeServerOptions opt;
  opt.first_token_delay_ms = 1;
  opt.token_delay_ms = 1;
  FakeOpenAiServer server(opt);
  ServeRunConfig config;
  config.model = "m";
  config.request_rate = 40;
  config.burstiness = 0.5;
  config.seed = 3;
  const int n = 12;
  ServeRun run = run_against(server, config, random_requests(n, 4, 2));
  auto want = arrival_offsets_s(ArrivalConfig{40, 0.5, 3}, n);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(run.metrics.completed, n);
  // Never early (strict: timers do not fire before their time); late only by scheduling
  // noise, with a bound loose enough for a loaded 2-core CI machine.
  for (int i = 0; i < n; ++i) {
    EXPECT_GE(run.results[i].send_s, (*want)[i] - 1e-3) << i;
    EXPECT_LE(run.results[i].send_s, (*want)[i] + 1.0) << i;
  }
}

TEST(BenchServe, DefaultModelFromModelsEndpointAndConnectionErrors) {
  FakeOpenAiServer server(FakeServerOptions{});
  auto client = HttpClient::create(server.url() + "/v1/");
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->url().base_path, "");
  auto model = fetch_default_model(**client);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(*model, "fake-model");

  // A port nobody listens on: every request fails with a connection error.
  std::string dead_url;
  {
    FakeOpenAiServer gone(FakeServerOptions{});
    dead_url = gone.url();
  }
  auto dead = HttpClient::create(dead_url);
  ASSERT_TRUE(dead.ok());
  ServeRunConfig config;
  config.model = "m";
  config.request_rate = INFINITY;
  auto run = run_serve_benchmark(**dead, config, random_requests(2, 4, 2));
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->metrics.failed, 2);
  EXPECT_NE(run->metrics.first_errors.at(0).find("cannot connect"), std::string::npos);
  EXPECT_FALSE(HttpClient::create("https://127.0.0.1:1").ok());
  EXPECT_FALSE(parse_http_url("http://:80").ok());
  auto u = parse_http_url("http://[::1]:9000/base/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "9000");
  EXPECT_EQ(u->base_path, "/base");
}

TEST(BenchServeCli, RateSweepWritesJsonAndPlot) {
  const std::string binary = std::string(KITE_BINARY_DIR) + "/kite";
  if (!fs::exists(binary)) GTEST_SKIP() << binary << " is not built";
  FakeServerOptions opt;
  opt.first_token_delay_ms = 5;
  opt.token_delay_ms = 2;
  FakeOpenAiServer server(opt);
  const fs::path dir =
      fs::temp_directory_path() / ("kite_bench_serve_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string json_path = (dir / "r.json").string(), plot_path = (dir / "p.html").string();
  const auto [code, out] = test_support::run_command(
      binary + " bench serve --url " + server.url() +
      " --dataset shared-prefix --prefix-len 6 --input-len 4 --output-len 3"
      " --num-prompts 5 --request-rate 50,inf --max-concurrency 4"
      " --slo-ttft-ms 10000 --slo-tpot-ms 0.001 --seed 2 --result-json " +
      json_path + " --plot " + plot_path + " 2>&1");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("Serving Benchmark Result"), std::string::npos) << out;
  std::ifstream jf(json_path);
  auto j = nlohmann::json::parse(jf, nullptr, false);
  ASSERT_TRUE(j.is_object()) << "bad JSON in " << json_path;
  EXPECT_EQ(j["model"], "fake-model");  // from GET /v1/models
  EXPECT_EQ(j["dataset"], "shared-prefix");
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["request_rate"], 50.0);
  EXPECT_EQ(j["runs"][1]["request_rate"], "inf");
  for (const auto& r : j["runs"]) {
    EXPECT_EQ(r["completed"], 5);
    EXPECT_EQ(r["failed"], 0);
    EXPECT_EQ(r["total_input_tokens"], 50);
    EXPECT_EQ(r["total_output_tokens"], 15);
    for (const char* k : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
      for (const char* s : {"mean", "p50", "p90", "p99"})
        EXPECT_TRUE(r[k][s].is_number()) << k << "." << s;
    EXPECT_GT(r["request_throughput"].get<double>(), 0);
    EXPECT_GT(r["output_throughput"].get<double>(), 0);
    EXPECT_GT(r["total_token_throughput"].get<double>(), r["output_throughput"].get<double>());
    EXPECT_EQ(r["good_requests"], 0);  // nobody meets a 1 µs TPOT
    EXPECT_EQ(r["goodput"], 0.0);
    EXPECT_EQ(r["requests"].size(), 5u);
    EXPECT_EQ(r["requests"][0]["itl_ms"].size(), 2u);
  }
  std::ifstream pf(plot_path);
  const std::string html((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);  // no external assets
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("TTFT p99"), std::string::npos);
  EXPECT_NE(html.find("TPOT p50"), std::string::npos);
  EXPECT_NE(html.find(">inf<"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kite::bench
