// Automatic prefix caching through the scheduler: shared system prompts, the never-the-last-
// block rule, and LRU eviction order (tail blocks first). Outputs are checked against the fake
// model, whose KV simulation catches any wrongly shared block.
#include <gtest/gtest.h>

#include <random>

#include "sched/scheduler.h"
#include "sim_model.h"

namespace kite::sched {
namespace {

using namespace testing;

constexpr int32_t kVocab = 5000;

void run_to_completion(SimDriver& d) {
  for (int i = 0; i < 2000 && d.scheduler.has_unfinished_requests(); ++i) {
    d.step();
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_FALSE(d.scheduler.has_unfinished_requests());
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// 20 requests with one 200-token system prompt: every request admitted after the first step
// reuses all 12 full blocks (192 tokens) of it.
TEST(PrefixCache, SharedSystemPromptHitsTheCache) {
  std::mt19937 rng(21);
  Scheduler s = make(config(400, [](SchedulerConfig& c) {
    c.block_size = 16;
    c.max_num_batched_tokens = 256;
  }));
  SimDriver d(s, kVocab);
  const std::vector<int32_t> system = random_prompt(rng, 200);
  std::vector<RequestParams> ps;
  int64_t num_query_tokens = 0;
  for (int i = 0; i < 20; ++i) {
    const int32_t suffix = std::uniform_int_distribution<int32_t>(10, 30)(rng);
    ps.push_back(params("r" + std::to_string(i), concat(system, random_prompt(rng, suffix)), 8));
    num_query_tokens += static_cast<int64_t>(ps.back().prompt_token_ids.size());
    ASSERT_TRUE(d.add(ps.back()).ok());
  }
  // Nothing is cached before the first step completes, so requests admitted in it miss.
  const SchedulerOutput first = s.schedule();
  int num_missed = 0;
  for (const auto& sr : first.scheduled) num_missed += sr.newly_admitted ? 1 : 0;
  ASSERT_GE(num_missed, 1);
  d.step_with(first);
  run_to_completion(d);

  const int64_t expected_hits = static_cast<int64_t>(20 - num_missed) * 192;
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.prefix_cache_queries, num_query_tokens);  // no preemption: one query each
  EXPECT_GE(st.prefix_cache_hits, expected_hits);
  EXPECT_GE(static_cast<double>(st.prefix_cache_hits) / static_cast<double>(num_query_tokens),
            static_cast<double>(expected_hits) / static_cast<double>(num_query_tokens));
  EXPECT_GE(expected_hits, 18 * 192);  // the bound itself must be meaningful
  for (const RequestParams& p : ps) {
    EXPECT_EQ(d.outputs.at(p.request_id), reference_generate(p, kVocab)) << p.request_id;
  }
}

TEST(PrefixCache, ReportsCachedTokensPerRequest) {
  std::mt19937 rng(22);
  Scheduler s = make(config(64, [](SchedulerConfig& c) { c.block_size = 8; }));
  const std::vector<int32_t> shared = random_prompt(rng, 20);
  ASSERT_TRUE(s.add_request(params("a", shared, 1)).ok());
  SchedulerOutput out = s.schedule();
  ASSERT_TRUE(s.update(out, std::vector<int32_t>{3}).ok());
  ASSERT_TRUE(s.add_request(params("b", concat(shared, random_prompt(rng, 5)), 1)).ok());
  out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_computed_tokens, 16);
  EXPECT_EQ(out.scheduled[0].num_scheduled_tokens, 9);
  auto events = s.update(out, std::vector<int32_t>{3});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].num_cached_tokens, 16);
  EXPECT_EQ((*events)[0].status, RequestStatus::kFinishedLength);
}

// A fully cached prompt still computes its last block, so the step has logits to sample.
TEST(PrefixCache, NeverReusesTheBlockOfTheLastToken) {
  std::mt19937 rng(23);
  Scheduler s = make(config(64, [](SchedulerConfig& c) { c.block_size = 16; }));
  SimDriver d(s, kVocab);
  const std::vector<int32_t> prompt = random_prompt(rng, 32);
  ASSERT_TRUE(d.add(params("first", prompt, 3)).ok());
  run_to_completion(d);

  struct Case {
    const char* id;
    std::vector<int32_t> prompt;
    int32_t expect_computed;
  };
  const std::vector<Case> cases = {
      {"same", prompt, 16},  // both blocks cached, the last one is recomputed
      {"plus-one", concat(prompt, random_prompt(rng, 1)), 32},
      {"shorter", std::vector<int32_t>(prompt.begin(), prompt.begin() + 31), 16},
      {"one-block", std::vector<int32_t>(prompt.begin(), prompt.begin() + 16), 0},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(d.add(params(c.id, c.prompt, 3)).ok());
    const SchedulerOutput out = s.schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    EXPECT_EQ(out.scheduled[0].num_computed_tokens, c.expect_computed) << c.id;
    EXPECT_EQ(out.scheduled[0].num_scheduled_tokens,
              static_cast<int32_t>(c.prompt.size()) - c.expect_computed)
        << c.id;
    EXPECT_TRUE(out.scheduled[0].samples_token);
    d.step_with(out);
    run_to_completion(d);
    EXPECT_EQ(d.outputs.at(c.id), reference_generate(params(c.id, c.prompt, 3), kVocab)) << c.id;
  }
}

// Finished requests leave their full blocks evictable, tail first; new allocations evict the
// least recently used, so a returning prompt keeps its head.
TEST(PrefixCache, EvictsLeastRecentlyUsedTailBlocksFirst) {
  std::mt19937 rng(24);
  Scheduler s = make(config(8, [](SchedulerConfig& c) { c.block_size = 4; }));
  SimDriver d(s, kVocab);
  const std::vector<int32_t> a = random_prompt(rng, 16);  // 4 full blocks
  const std::vector<int32_t> b = random_prompt(rng, 21);  // 5 full blocks + 1 partial
  auto run_one = [&](const char* id, const std::vector<int32_t>& prompt) {
    EXPECT_TRUE(d.add(params(id, prompt, 1)).ok());
    run_to_completion(d);
    return s.stats().prefix_cache_hits;
  };
  run_one("a", a);
  EXPECT_EQ(s.block_pool().num_evictable_blocks(), 4);
  run_one("b", b);  // 6 blocks: 4 free ones, then evicts a's last two blocks
  int64_t hits = s.stats().prefix_cache_hits;
  EXPECT_EQ(hits, 0);
  // a plus 4 tokens may reuse up to 4 blocks; only the first 2 survived.
  EXPECT_EQ(run_one("a2", concat(a, random_prompt(rng, 4))) - hits, 8);
  hits = s.stats().prefix_cache_hits;
  // a2 took b's partial block and evicted b's two tail blocks: b keeps 3 of its 5.
  EXPECT_EQ(run_one("b2", b) - hits, 12);
  EXPECT_TRUE(s.check_integrity().ok());
}

TEST(PrefixCache, DisabledMeansNoHits) {
  std::mt19937 rng(25);
  Scheduler s = make(config(64, [](SchedulerConfig& c) { c.enable_prefix_caching = false; }));
  SimDriver d(s, kVocab);
  const std::vector<int32_t> prompt = random_prompt(rng, 40);
  ASSERT_TRUE(d.add(params("a", prompt, 2)).ok());
  run_to_completion(d);
  ASSERT_TRUE(d.add(params("b", prompt, 2)).ok());
  run_to_completion(d);
  EXPECT_EQ(s.stats().prefix_cache_hits, 0);
  EXPECT_EQ(s.block_pool().num_cached_blocks(), 0);
  EXPECT_EQ(d.outputs.at("a"), d.outputs.at("b"));
}

}  // namespace
}  // namespace kite::sched
