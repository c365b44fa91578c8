// The engine end to end on the fixture models: many greedy requests of mixed lengths,
// arriving over time and batched continuously (with chunked prefill, prefix sharing and, with a
// tiny KV pool, preemption), produce exactly the tokens of the same requests run one at a time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "engine/llm.h"

namespace kite {
namespace {

const std::string kTiny = std::string(KITE_SOURCE_DIR) + "/models/kite-tiny";

EngineConfig config_for(const std::string& dir) {
  EngineConfig c;
  c.model_dir = dir;
  c.kv_cache_memory_bytes = 64 << 20;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 32;
  return c;
}

SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<GenerateInput> random_inputs(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared(40);
  for (auto& t : shared) t = 5 + rng() % (vocab - 5);
  std::vector<GenerateInput> inputs;
  for (int i = 0; i < n; ++i) {
    GenerateInput in;
    if (i % 3 == 0) in.prompt_token_ids = shared;  // a shared system prompt
    int len = 1 + rng() % 60;
    for (int j = 0; j < len; ++j) in.prompt_token_ids.push_back(5 + rng() % (vocab - 5));
    in.sampling = greedy(1 + rng() % 20);
    inputs.push_back(in);
  }
  return inputs;
}

void expect_same_as_solo(EngineConfig batched_config, int n) {
  auto solo = LLM::create(config_for(batched_config.model_dir));
  ASSERT_TRUE(solo.ok()) << solo.status().message();
  const int vocab = static_cast<int>(solo->engine().model_config().vocab_size);
  auto inputs = random_inputs(n, vocab, 7);
  std::vector<std::vector<int32_t>> want;
  for (const auto& in : inputs) {
    auto r = solo->generate({in});
    ASSERT_TRUE(r.ok()) << r.status().message();
    want.push_back((*r)[0].token_ids);
  }

  auto llm = LLM::create(batched_config);
  ASSERT_TRUE(llm.ok()) << llm.status().message();
  // Requests arrive over time from several threads while earlier ones are running.
  std::vector<std::vector<int32_t>> got(n);
  std::atomic<int> num_finished{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = c; i < n; i += 4) {
        std::this_thread::sleep_for(std::chrono::milliseconds(i % 7));
        auto r = llm->engine().add_request(
            EngineRequest{"r" + std::to_string(i), inputs[i].prompt_token_ids, inputs[i].sampling,
                          i % 3},
            [&got, &num_finished, i](const RequestOutput& o) {
              got[i].insert(got[i].end(), o.new_token_ids.begin(), o.new_token_ids.end());
              if (o.finished()) ++num_finished;
            });
        ASSERT_TRUE(r.ok()) << r.message();
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int tries = 0; tries < 6000 && num_finished < n; ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(num_finished.load(), n);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // stats are taken after the step
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
  EXPECT_TRUE(llm->engine().check_integrity().ok());
  auto stats = llm->engine().stats();
  EXPECT_GT(stats.prefix_cache_hits, 0);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
}

TEST(Engine, BatchedGreedyEqualsOneAtATime) { expect_same_as_solo(config_for(kTiny), 64); }

TEST(Engine, TinyKvPoolPreemptsAndStillMatches) {
  EngineConfig c = config_for(kTiny);
  // 6 layers x 80 floats x 4 B = 1920 B/token: 12 blocks of 16 tokens.
  c.kv_cache_memory_bytes = 12 * 16 * 1920;
  expect_same_as_solo(c, 16);
}

TEST(Engine, RejectsBadRequestsWithClearErrors) {
  auto llm = LLM::create(config_for(kTiny));
  ASSERT_TRUE(llm.ok());
  auto noop = [](const RequestOutput&) {};
  Status empty = llm->engine().add_request(EngineRequest{"a", {}, greedy(4), 0}, noop);
  EXPECT_EQ(empty.code(), ErrorCode::kInvalidArgument);
  Status too_long = llm->engine().add_request(
      EngineRequest{"b", std::vector<int32_t>(5000, 7), greedy(4), 0}, noop);
  EXPECT_NE(too_long.message().find("maximum context length"), std::string::npos)
      << too_long.message();
  SamplingParams bad = greedy(4);
  bad.top_p = 1.5f;
  Status bad_p = llm->engine().add_request(EngineRequest{"c", {1, 2, 3}, bad, 0}, noop);
  EXPECT_NE(bad_p.message().find("top_p"), std::string::npos);
  Status bad_id = llm->engine().add_request(EngineRequest{"d", {1, 999999}, greedy(4), 0}, noop);
  EXPECT_NE(bad_id.message().find("vocabulary"), std::string::npos);
}

TEST(Engine, StopStringEndsGenerationAndFreesBlocks) {
  auto llm = LLM::create(config_for(kTiny));
  ASSERT_TRUE(llm.ok());
  GenerateInput in;
  in.prompt_token_ids = llm->tokenizer().encode("The kernel scheduler", true);
  in.sampling = greedy(32);
  auto full = llm->generate({in});
  ASSERT_TRUE(full.ok());
  const std::string text = (*full)[0].text;
  ASSERT_GT(text.size(), 12u);
  std::string stop = text.substr(6, 4);
  in.sampling.stop = {stop};
  auto cut = llm->generate({in});
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ((*cut)[0].finish_reason, "stop");
  EXPECT_EQ((*cut)[0].text, text.substr(0, text.find(stop)));
  EXPECT_TRUE(llm->engine().check_integrity().ok());
  EXPECT_EQ(llm->engine().stats().kv_cache_usage, 0.0);
}

TEST(Engine, AbortEndsTheStreamAndFreesBlocks) {
  auto llm = LLM::create(config_for(kTiny));
  ASSERT_TRUE(llm.ok());
  std::atomic<bool> finished{false};
  std::string reason;
  Status st = llm->engine().add_request(EngineRequest{"long", {1, 2, 3, 4}, greedy(1500), 0},
                                        [&](const RequestOutput& o) {
                                          if (o.finished()) {
                                            reason = *o.finish_reason;
                                            finished = true;
                                          }
                                        });
  ASSERT_TRUE(st.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  llm->engine().abort("long");
  for (int i = 0; i < 500 && !finished; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(finished);
  EXPECT_EQ(reason, "abort");
  EXPECT_TRUE(llm->engine().check_integrity().ok());
}

}  // namespace
}  // namespace kite
