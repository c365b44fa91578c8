// Scheduler behaviour on small hand-built scenarios: chunked prefill, budgets, stop rules,
// admission control, aborts in every state, preemption and capacity failures.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "sim_model.h"

namespace kite::sched {
namespace {

using namespace testing;

// Feeds `token` to every request that samples.
Result<std::vector<RequestStepOutput>> update_all(Scheduler& s, const SchedulerOutput& out,
                                                  int32_t token) {
  std::vector<int32_t> sampled(out.scheduled.size(), token);
  return s.update(out, sampled);
}

TEST(Scheduler, RejectsBadConfig) {
  EXPECT_FALSE(Scheduler::create(config(0)).ok());
  EXPECT_FALSE(
      Scheduler::create(config(8, [](SchedulerConfig& c) { c.max_num_batched_tokens = 0; })).ok());
  EXPECT_FALSE(Scheduler::create(config(8, [](SchedulerConfig& c) {
                 c.long_prefill_token_threshold = -1;
               })).ok());
}

TEST(Scheduler, ChunkedPrefillNeverStallsRunningDecodes) {
  std::mt19937 rng(1);
  Scheduler s = make(config(64, [](SchedulerConfig& c) {
    c.block_size = 16;
    c.max_num_batched_tokens = 32;
  }));
  ASSERT_TRUE(s.add_request(params("a", random_prompt(rng, 10), 20)).ok());
  SchedulerOutput out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_TRUE(out.scheduled[0].samples_token);
  ASSERT_TRUE(update_all(s, out, 5).ok());

  ASSERT_TRUE(s.add_request(params("b", random_prompt(rng, 80), 4)).ok());
  const std::vector<int32_t> expected_chunks = {31, 31, 18};
  int32_t computed = 0;
  for (int32_t chunk : expected_chunks) {
    out = s.schedule();
    ASSERT_EQ(out.scheduled.size(), 2u);
    EXPECT_EQ(out.scheduled[0].request_id, "a");  // the running decode comes first
    EXPECT_EQ(out.scheduled[0].num_scheduled_tokens, 1);
    EXPECT_EQ(out.scheduled[1].request_id, "b");
    EXPECT_EQ(out.scheduled[1].num_computed_tokens, computed);
    EXPECT_EQ(out.scheduled[1].num_scheduled_tokens, chunk);
    EXPECT_EQ(out.scheduled[1].newly_admitted, computed == 0);
    EXPECT_EQ(out.scheduled[1].samples_token, computed + chunk == 80);
    EXPECT_EQ(out.scheduled[1].block_table.size(),
              static_cast<size_t>((computed + chunk + 15) / 16));
    EXPECT_LE(out.total_num_scheduled_tokens, 32);
    auto events = update_all(s, out, 7);
    ASSERT_TRUE(events.ok());
    // Partial chunks produce no token for b.
    EXPECT_EQ(events->size(), computed + chunk == 80 ? 2u : 1u);
    computed += chunk;
  }
  EXPECT_EQ(s.find_request("b")->num_output_tokens(), 1);
}

TEST(Scheduler, LongPrefillThresholdSharesTheBudget) {
  std::mt19937 rng(2);
  Scheduler s = make(config(64, [](SchedulerConfig& c) {
    c.max_num_batched_tokens = 64;
    c.long_prefill_token_threshold = 24;
  }));
  for (const char* id : {"a", "b", "c"})
    ASSERT_TRUE(s.add_request(params(id, random_prompt(rng, 40), 2)).ok());
  const SchedulerOutput out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(out.scheduled[0].num_scheduled_tokens, 24);
  EXPECT_EQ(out.scheduled[1].num_scheduled_tokens, 24);
  EXPECT_EQ(out.scheduled[2].num_scheduled_tokens, 16);
  EXPECT_EQ(out.total_num_scheduled_tokens, 64);
}

TEST(Scheduler, MaxNumSeqsBoundsTheRunningSet) {
  std::mt19937 rng(3);
  Scheduler s = make(config(64, [](SchedulerConfig& c) { c.max_num_seqs = 2; }));
  for (const char* id : {"a", "b", "c"})
    ASSERT_TRUE(s.add_request(params(id, random_prompt(rng, 5), 3)).ok());
  const SchedulerOutput out = s.schedule();
  EXPECT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(s.num_running(), 2);
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_EQ(s.find_request("c")->status, RequestStatus::kWaiting);
}

TEST(Scheduler, StopRules) {
  std::mt19937 rng(4);
  Scheduler s = make(config(64));
  RequestParams eos = params("eos", random_prompt(rng, 5), 10);
  eos.ignore_eos = false;
  eos.eos_token_ids = {2, 99};
  RequestParams ignore = eos;
  ignore.request_id = "ignore";
  ignore.ignore_eos = true;
  RequestParams stop = params("stop", random_prompt(rng, 5), 10);
  stop.stop_token_ids = {99};
  RequestParams len = params("len", random_prompt(rng, 5), 2);
  for (const auto& p : {eos, ignore, stop, len}) ASSERT_TRUE(s.add_request(p).ok());

  auto events = update_all(s, s.schedule(), 7);  // neither EOS nor stop
  ASSERT_TRUE(events.ok());
  for (const auto& e : *events) EXPECT_EQ(e.status, RequestStatus::kRunning) << e.request_id;
  events = update_all(s, s.schedule(), 99);
  ASSERT_TRUE(events.ok());
  std::map<std::string, RequestStatus> st;
  for (const auto& e : *events) st[e.request_id] = e.status;
  EXPECT_EQ(st["eos"], RequestStatus::kFinishedStopped);
  EXPECT_EQ(st["ignore"], RequestStatus::kRunning);
  EXPECT_EQ(st["stop"], RequestStatus::kFinishedStopped);
  EXPECT_EQ(st["len"], RequestStatus::kFinishedLength);
  // Finished requests leave at once and free their blocks in the same step.
  EXPECT_EQ(s.num_running(), 1);
  EXPECT_EQ(s.block_pool().num_in_use_blocks(), 1);
  EXPECT_EQ(s.find_request("eos"), nullptr);
  const SchedulerOutput next = s.schedule();
  EXPECT_EQ(next.finished_request_ids.size(), 3u);
  ASSERT_TRUE(s.check_integrity().ok());
}

TEST(Scheduler, AdmissionControl) {
  std::mt19937 rng(5);
  Scheduler s = make(config(8, [](SchedulerConfig& c) {
    c.block_size = 16;
    c.max_model_len = 100;
    c.max_waiting = 2;
  }));
  Status st = s.add_request(params("empty", {}, 4));
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("prompt is empty"), std::string::npos) << st.message();

  st = s.add_request(params("long", random_prompt(rng, 90), 20));
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("max_model_len=100"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("90 tokens"), std::string::npos) << st.message();

  EXPECT_EQ(s.add_request(params("zero", random_prompt(rng, 5), 0)).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(params("", random_prompt(rng, 5), 4)).code(),
            ErrorCode::kInvalidArgument);

  ASSERT_TRUE(s.add_request(params("a", random_prompt(rng, 5), 4)).ok());
  EXPECT_EQ(s.add_request(params("a", random_prompt(rng, 5), 4)).code(),
            ErrorCode::kInvalidArgument);  // duplicate id
  ASSERT_TRUE(s.add_request(params("b", random_prompt(rng, 5), 4)).ok());
  st = s.add_request(params("c", random_prompt(rng, 5), 4));
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted);  // the server's HTTP 429
  EXPECT_NE(st.message().find("retry"), std::string::npos);
  // Admission frees queue space.
  ASSERT_TRUE(update_all(s, s.schedule(), 3).ok());
  EXPECT_TRUE(s.add_request(params("c", random_prompt(rng, 5), 4)).ok());

  Scheduler tiny = make(config(2, [](SchedulerConfig& c) {
    c.block_size = 16;
    c.max_model_len = 100;
  }));
  st = tiny.add_request(params("big", random_prompt(rng, 40), 4));
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("larger than the whole KV cache"), std::string::npos) << st.message();
}

TEST(Scheduler, UpdateRejectsMismatchedResults) {
  std::mt19937 rng(6);
  Scheduler s = make(config(16));
  ASSERT_TRUE(s.add_request(params("a", random_prompt(rng, 5), 4)).ok());
  ASSERT_TRUE(s.add_request(params("b", random_prompt(rng, 5), 4)).ok());
  const SchedulerOutput out = s.schedule();
  const std::vector<int32_t> one = {1};
  EXPECT_EQ(s.update(out, one).status().code(), ErrorCode::kInvalidArgument);
  SchedulerOutput stale = out;
  stale.step_id -= 1;
  EXPECT_EQ(update_all(s, stale, 1).status().code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(update_all(s, out, 1).ok());  // the failed calls changed nothing
  EXPECT_EQ(update_all(s, out, 1).status().code(), ErrorCode::kInvalidArgument);  // twice
  EXPECT_EQ(s.find_request("a")->num_output_tokens(), 1);
}

}  // namespace
}  // namespace kite::sched
