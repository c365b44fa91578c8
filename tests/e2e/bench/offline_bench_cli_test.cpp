// `kite bench latency` on dummy weights from a config-only folder, and `kite bench
// throughput` on the shipped model, through the built binary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_command.h"

namespace kite {
namespace {

namespace fs = std::filesystem;

class BenchOfflineCli : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = std::string(KITE_BINARY_DIR) + "/kite";
    if (!fs::exists(binary_)) GTEST_SKIP() << binary_ << " is not built";
    dir_ = fs::temp_directory_path() / ("kite_bench_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  nlohmann::json run_json(const std::string& args) {
    const std::string json_path = (dir_ / "result.json").string();
    const auto [status, out] =
        test_support::run_command(binary_ + " " + args + " --result-json " + json_path + " 2>&1");
    EXPECT_EQ(status, 0) << out;
    output_ = out;
    std::ifstream f(json_path);
    return nlohmann::json::parse(f, nullptr, false);
  }
  std::string binary_, output_;
  fs::path dir_;
};

TEST_F(BenchOfflineCli, LatencyOnDummyWeightsFromConfigOnly) {
  fs::copy_file(std::string(KITE_SOURCE_DIR) + "/tests/fixtures/models/llama3/config.json",
                dir_ / "config.json");
  auto j = run_json("bench latency --model " + dir_.string() +
                    " --load-format dummy --input-len 12 --output-len 5 --iters 3 --warmup-iters 1"
                    " --kv-cache-memory 8");
  ASSERT_TRUE(j.is_object()) << output_;
  EXPECT_EQ(j["benchmark"], "latency");
  EXPECT_EQ(j["model"]["load_format"], "dummy");
  EXPECT_EQ(j["model"]["model_type"], "llama");
  const auto& r = j["result"];
  EXPECT_EQ(r["prefill_ms"]["count"], 3);
  EXPECT_EQ(r["decode_ms_per_step"]["count"], 3 * 4);  // output_len - 1 gaps per iteration
  EXPECT_EQ(r["decode_gaps_left_out"], 0);
  EXPECT_GT(r["prefill_ms"]["mean"].get<double>(), 0);
  EXPECT_GT(r["decode_ms_per_step"]["p50"].get<double>(), 0);
  EXPECT_LE(r["decode_ms_per_step"]["p50"].get<double>(),
            r["decode_ms_per_step"]["p99"].get<double>());
  EXPECT_GT(r["weight_bytes_per_step"].get<double>(), 0);
  EXPECT_GT(r["decode_weight_gbps_mean"].get<double>(), 0);
  EXPECT_NE(output_.find("GB/s"), std::string::npos);
}

// An unwritable --result-json (or --plot) is refused before the benchmark runs — before the
// model loads or the first request is sent — instead of after it, which lost the results.
TEST_F(BenchOfflineCli, UnwritableResultPathsAreRefusedBeforeRunning) {
  fs::copy_file(std::string(KITE_SOURCE_DIR) + "/tests/fixtures/models/llama3/config.json",
                dir_ / "config.json");
  const std::string model =
      " --model " + dir_.string() + " --load-format dummy --kv-cache-memory 8";
  const std::string missing = (dir_ / "no_such_folder" / "r.json").string();
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"bench latency" + model + " --input-len 8 --output-len 4 --iters 1 --result-json " + missing,
       "does not exist"},
      {"bench throughput" + model + " --input-len 8 --output-len 4 --num-prompts 2 --result-json " +
           dir_.string(),
       "is a folder"},
      // No server listens on port 1: the refusal must come before any connection attempt.
      {"bench serve --url http://127.0.0.1:1 --num-prompts 1 --result-json " + missing,
       "does not exist"},
      {"bench serve --url http://127.0.0.1:1 --num-prompts 1 --plot " + missing, "does not exist"},
  };
  for (const Case& c : cases) {
    const auto [status, out] = test_support::run_command(binary_ + " " + c.args + " 2>&1");
    EXPECT_NE(status, 0) << c.args;
    EXPECT_NE(out.find(c.expect), std::string::npos) << c.args << "\n" << out;
    EXPECT_EQ(out.find("loaded "), std::string::npos) << "the model loaded first: " << out;
    EXPECT_EQ(out.find("requests at"), std::string::npos) << "the benchmark ran first: " << out;
  }
  EXPECT_FALSE(fs::exists(dir_ / "no_such_folder"));
}

// Batch x input above the token budget: the prompts are prefilled in chunks over several steps
// while the first requests already decode; those steps are not decode steps.
TEST_F(BenchOfflineCli, LatencyLeavesOutStepsWithPromptChunks) {
  fs::copy_file(std::string(KITE_SOURCE_DIR) + "/tests/fixtures/models/llama3/config.json",
                dir_ / "config.json");
  const std::string base = "bench latency --model " + dir_.string() +
                           " --load-format dummy --batch-size 4 --input-len 12 --iters 2"
                           " --warmup-iters 0 --kv-cache-memory 8 --max-num-batched-tokens 16";
  auto j = run_json(base + " --output-len 8");
  ASSERT_TRUE(j.is_object()) << output_;
  const auto& r = j["result"];
  // 48 prompt tokens in 16-token steps: the last prompt's first token comes at least two
  // steps after the first one's, so at least two of each iteration's 7 gaps are left out.
  const int64_t kept = r["decode_ms_per_step"]["count"].get<int64_t>();
  const int64_t left = r["decode_gaps_left_out"].get<int64_t>();
  EXPECT_EQ(kept + left, 2 * 7);
  EXPECT_GE(left, 2 * 2);
  EXPECT_GT(kept, 0);
  EXPECT_NE(output_.find("left out"), std::string::npos) << output_;
  // Within the budget all prompts fit one step; only a step the engine began between two of
  // the bench's add_request calls (at most batch - 1 per iteration) can still be left out.
  auto k = run_json("bench latency --model " + dir_.string() +
                    " --load-format dummy --batch-size 4 --input-len 12 --iters 2 --warmup-iters 0"
                    " --kv-cache-memory 8 --max-num-batched-tokens 64 --output-len 8");
  ASSERT_TRUE(k.is_object()) << output_;
  const int64_t k_left = k["result"]["decode_gaps_left_out"].get<int64_t>();
  EXPECT_EQ(k["result"]["decode_ms_per_step"]["count"].get<int64_t>() + k_left, 2 * 7);
  EXPECT_LE(k_left, 2 * 3);
}

TEST_F(BenchOfflineCli, LatencyRefusesConfigOnlyFolderWithoutDummy) {
  fs::copy_file(std::string(KITE_SOURCE_DIR) + "/tests/fixtures/models/qwen2/config.json",
                dir_ / "config.json");
  const auto [status, out] = test_support::run_command(
      binary_ + " bench latency --model " + dir_.string() + " --input-len 4 --output-len 2 2>&1");
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("kite: error:"), std::string::npos) << out;
}

TEST_F(BenchOfflineCli, ThroughputOnShippedModel) {
  auto j = run_json(
      "bench throughput --input-len 8 --output-len 4 --num-prompts 6 --kv-cache-memory 16");
  ASSERT_TRUE(j.is_object()) << output_;
  EXPECT_EQ(j["benchmark"], "throughput");
  EXPECT_EQ(j["model"]["load_format"], "auto");
  const auto& r = j["result"];
  EXPECT_EQ(r["total_prompt_tokens"], 6 * 8);
  EXPECT_EQ(r["total_output_tokens"], 6 * 4);
  const double elapsed = r["elapsed_s"].get<double>();
  ASSERT_GT(elapsed, 0);
  EXPECT_NEAR(r["requests_per_s"].get<double>(), 6 / elapsed, 1e-6);
  EXPECT_NEAR(r["output_tokens_per_s"].get<double>(), 24 / elapsed, 1e-6);
  EXPECT_NEAR(r["total_tokens_per_s"].get<double>(), 72 / elapsed, 1e-6);
}

}  // namespace
}  // namespace kite
