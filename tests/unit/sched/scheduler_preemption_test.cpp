// Preemption, capacity failure and abort scenarios, each small enough to reason about by hand;
// outputs are checked against the fake model run alone.
#include <gtest/gtest.h>

#include <random>

#include "sched/scheduler.h"
#include "sim_model.h"

namespace kite::sched {
namespace {

using namespace testing;

constexpr int32_t kVocab = 1000;

// Runs the driver until nothing is left (bounded, so a livelock fails instead of hanging).
void run_to_completion(SimDriver& d, int max_steps = 1000) {
  for (int i = 0; i < max_steps && d.scheduler.has_unfinished_requests(); ++i) {
    d.step();
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_FALSE(d.scheduler.has_unfinished_requests()) << "did not finish in " << max_steps;
}

void expect_reference_outputs(const SimDriver& d, const std::vector<RequestParams>& ps) {
  for (const RequestParams& p : ps) {
    EXPECT_EQ(d.outputs.at(p.request_id), reference_generate(p, kVocab)) << p.request_id;
  }
}

// Three equal-priority requests fill the cache; the newest is preempted when the oldest
// needs a block, then resumes and still produces exactly its solo output.
TEST(SchedulerPreemption, MemoryPressurePreemptsNewestOfLowestPriority) {
  for (bool oldest_is_low_priority : {false, true}) {
    std::mt19937 rng(10);
    Scheduler s = make(config(6, [](SchedulerConfig& c) { c.block_size = 4; }));
    SimDriver d(s, kVocab);
    std::vector<RequestParams> ps;
    for (const char* id : {"A", "B", "C"}) ps.push_back(params(id, random_prompt(rng, 7), 6));
    if (oldest_is_low_priority) ps[0].priority = 1;
    for (const auto& p : ps) ASSERT_TRUE(d.add(p).ok());
    d.step();  // prefill: 2 blocks each, cache full
    d.step();  // decode position 7: still inside block 2
    EXPECT_EQ(s.block_pool().num_allocatable_blocks(), 0);
    const SchedulerOutput out = s.schedule();  // position 8 needs a third block
    const std::string victim = oldest_is_low_priority ? "A" : "C";
    EXPECT_EQ(out.preempted_request_ids, std::vector<std::string>{victim});
    EXPECT_EQ(out.scheduled.size(), 2u);
    for (const auto& sr : out.scheduled) EXPECT_NE(sr.request_id, victim);
    EXPECT_EQ(s.find_request(victim)->status, RequestStatus::kPreempted);
    EXPECT_EQ(s.stats().num_preempted, 1);
    d.step_with(out);
    run_to_completion(d);
    expect_reference_outputs(d, ps);
    EXPECT_EQ(s.stats().num_preemptions_total, 1);
  }
}

// A higher-priority arrival takes the memory of a lower-priority running request, even one
// already scheduled in the same step; the victim resumes from its cached prefix.
TEST(SchedulerPreemption, HigherPriorityArrivalPreemptsLowerPriority) {
  std::mt19937 rng(11);
  Scheduler s = make(config(8, [](SchedulerConfig& c) { c.block_size = 4; }));
  SimDriver d(s, kVocab);
  RequestParams low = params("low", random_prompt(rng, 20), 8, /*priority=*/5);
  RequestParams high = params("high", random_prompt(rng, 16), 8, /*priority=*/0);
  RequestParams peer = params("peer", random_prompt(rng, 3), 2, /*priority=*/5);
  ASSERT_TRUE(d.add(low).ok());
  d.step();  // low holds 6 of 8 blocks
  ASSERT_TRUE(d.add(high).ok());
  ASSERT_TRUE(d.add(peer).ok());
  const SchedulerOutput out = s.schedule();
  EXPECT_EQ(out.preempted_request_ids, std::vector<std::string>{"low"});
  ASSERT_EQ(out.scheduled.size(), 1u);  // low was scheduled by phase 1, then taken out
  EXPECT_EQ(out.scheduled[0].request_id, "high");
  EXPECT_TRUE(out.scheduled[0].newly_admitted);
  // peer (priority 5) may not overtake the preempted low (priority 5, preempted first).
  EXPECT_EQ(s.find_request("peer")->status, RequestStatus::kWaiting);
  d.step_with(out);
  run_to_completion(d);
  expect_reference_outputs(d, {low, high, peer});
  // low's 20-token prompt left 5 full blocks cached when it was preempted; high's 6 blocks
  // (23 tokens of KV) then evicted 3 of them, tail first, so low resumed from its first 2.
  EXPECT_EQ(s.stats().prefix_cache_hits, 8);
}

// Equal priority never preempts for an arrival: the newcomer waits.
TEST(SchedulerPreemption, EqualPriorityArrivalWaits) {
  std::mt19937 rng(12);
  Scheduler s = make(config(8, [](SchedulerConfig& c) { c.block_size = 4; }));
  SimDriver d(s, kVocab);
  ASSERT_TRUE(d.add(params("first", random_prompt(rng, 28), 4)).ok());
  d.step();
  ASSERT_TRUE(d.add(params("second", random_prompt(rng, 16), 4)).ok());
  const SchedulerOutput out = s.schedule();
  EXPECT_TRUE(out.preempted_request_ids.empty());
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].request_id, "first");
  d.step_with(out);
  run_to_completion(d);
  EXPECT_EQ(d.final_status.at("second"), RequestStatus::kFinishedLength);
}

// A request whose KV outgrows the whole cache fails with a reason after preempting the
// others; the others then finish normally.
TEST(SchedulerPreemption, RequestThatCannotFitAloneFails) {
  std::mt19937 rng(13);
  Scheduler s = make(config(4, [](SchedulerConfig& c) {
    c.block_size = 4;
    c.max_model_len = 64;
  }));
  SimDriver d(s, kVocab);
  RequestParams big = params("big", random_prompt(rng, 9), 30);
  RequestParams small = params("small", random_prompt(rng, 3), 3);
  ASSERT_TRUE(d.add(big).ok());
  ASSERT_TRUE(d.add(small).ok());
  run_to_completion(d);
  EXPECT_EQ(d.final_status.at("big"), RequestStatus::kFinishedError);
  ASSERT_TRUE(d.errors.contains("big"));
  EXPECT_NE(d.errors.at("big").find("whole KV cache has 4 blocks"), std::string::npos)
      << d.errors.at("big");
  // Generated until KV for all 16 slots was computed; the 17th token needs no KV to exist.
  EXPECT_EQ(d.outputs.at("big").size(), 16u - 9u + 1u);
  EXPECT_EQ(d.final_status.at("small"), RequestStatus::kFinishedLength);
  expect_reference_outputs(d, {small});
  EXPECT_EQ(s.block_pool().num_in_use_blocks(), 0);
}

// Aborting in any state releases the request's blocks at once and leaves the cache whole.
TEST(SchedulerAbort, EveryStateFreesBlocks) {
  std::mt19937 rng(14);
  Scheduler s = make(config(16, [](SchedulerConfig& c) {
    c.block_size = 4;
    c.max_num_batched_tokens = 12;
    c.long_prefill_token_threshold = 8;
    c.max_num_seqs = 3;
  }));
  SimDriver d(s, kVocab);
  ASSERT_TRUE(d.add(params("decode", random_prompt(rng, 5), 50, 1)).ok());
  d.step();
  ASSERT_TRUE(d.add(params("prefill", random_prompt(rng, 30), 50, 1)).ok());
  ASSERT_TRUE(d.add(params("victim", random_prompt(rng, 6), 50, 2)).ok());
  d.step();
  d.step();
  ASSERT_EQ(s.find_request("prefill")->status, RequestStatus::kRunning);
  ASSERT_LT(s.find_request("prefill")->num_computed_tokens, 30);
  ASSERT_EQ(s.find_request("victim")->status, RequestStatus::kRunning);
  // A priority-0 arrival with no free sequence slot preempts the priority-2 victim.
  ASSERT_TRUE(d.add(params("urgent", random_prompt(rng, 4), 50, 0)).ok());
  ASSERT_TRUE(d.add(params("queued", random_prompt(rng, 4), 50, 3)).ok());
  d.step();
  ASSERT_EQ(s.find_request("victim")->status, RequestStatus::kPreempted);
  ASSERT_EQ(s.find_request("queued")->status, RequestStatus::kWaiting);

  auto blocks_of = [&](const std::string& id) {
    return static_cast<int32_t>(s.find_request(id)->block_table.size());
  };
  for (const char* id : {"queued", "victim", "prefill", "decode"}) {
    const int32_t in_use = s.block_pool().num_in_use_blocks();
    const int32_t held = blocks_of(id);  // no sharing here: all prompts differ
    ASSERT_TRUE(s.abort(id).ok()) << id;
    EXPECT_EQ(s.find_request(id), nullptr) << id;
    EXPECT_EQ(s.block_pool().num_in_use_blocks(), in_use - held) << id;
    const Status st = s.check_integrity();
    ASSERT_TRUE(st.ok()) << id << ": " << st.message();
  }
  EXPECT_EQ(s.abort("decode").code(), ErrorCode::kNotFound);
  // Between schedule() and update() an abort waits for update(), then frees everything.
  const SchedulerOutput out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.finished_request_ids.size(), 4u);  // the runner learns of the aborts
  ASSERT_TRUE(s.abort("urgent").ok());
  EXPECT_NE(s.find_request("urgent"), nullptr);
  d.step_with(out);
  EXPECT_EQ(s.find_request("urgent"), nullptr);
  EXPECT_FALSE(s.has_unfinished_requests());
  EXPECT_EQ(s.block_pool().num_in_use_blocks(), 0);
  EXPECT_EQ(s.block_pool().num_free_blocks() + s.block_pool().num_evictable_blocks(), 16);
  const SchedulerOutput next = s.schedule();
  EXPECT_TRUE(next.scheduled.empty());
  EXPECT_EQ(next.finished_request_ids, std::vector<std::string>{"urgent"});
}

}  // namespace
}  // namespace kite::sched
