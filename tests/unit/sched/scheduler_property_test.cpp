// Scheduler invariants over random workloads, driven by the fake model (sim_model.h).
//
// Checked after every schedule():
//  budget      total tokens <= max_num_batched_tokens, requests <= max_num_seqs, every chunk
//              >= 1 token and <= long_prefill_token_threshold (when set);
//  order       every request admitted this step sorted (priority, preempted-first, arrival)
//              before every request still waiting afterwards (strict head-of-line admission);
//  preemption  every request preempted this step has a larger (priority, arrival) than every
//              request scheduled in it, and none is both preempted and scheduled;
//  priority    if a waiting request has a smaller priority value than a running one, the
//              step used its whole token budget or preempted something (i.e. memory and
//              sequence slots never favour lower priority);
//  growth      a running request's block table only grows between steps;
// and at the end: every request finished (or was aborted), each output equals the request
// run alone, no block is referenced, and the cache is intact.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <tuple>

#include "sched/scheduler.h"
#include "sim_model.h"

namespace kite::sched {
namespace {

using namespace testing;

constexpr int32_t kVocab = 64;  // small, so EOS and stop tokens end requests at random lengths
constexpr int32_t kEos = 0;

struct Workload {
  const char* name;
  SchedulerConfig config;
  int num_requests;
  int max_priority;       // priorities drawn from [0, max_priority]
  double abort_per_step;  // probability of aborting one random live request each step
  bool expect_preemption;
};

SchedulerConfig cfg(int32_t num_blocks, int32_t block_size, int32_t budget, int32_t seqs,
                    int32_t max_model_len, int32_t threshold, bool prefix_caching) {
  SchedulerConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = seqs;
  c.max_model_len = max_model_len;
  c.long_prefill_token_threshold = threshold;
  c.enable_prefix_caching = prefix_caching;
  c.max_waiting = 10000;
  c.prefix_cache_salt = "test-model";
  return c;
}

std::vector<RequestParams> make_requests(const Workload& w, std::mt19937& rng) {
  const int32_t max_len = w.config.max_model_len;
  std::uniform_int_distribution<int32_t> tok(1, kVocab - 1);
  // A few shared "system prompts" so the prefix cache sees real sharing.
  std::vector<std::vector<int32_t>> systems;
  for (int i = 0; i < 3; ++i) {
    systems.push_back(
        random_prompt(rng, std::uniform_int_distribution<int32_t>(1, max_len / 2)(rng)));
  }
  std::vector<RequestParams> out;
  for (int i = 0; i < w.num_requests; ++i) {
    RequestParams p;
    p.request_id = "r" + std::to_string(i);
    p.max_tokens = std::uniform_int_distribution<int32_t>(1, std::min(24, max_len / 3))(rng);
    const int32_t max_prompt = max_len - p.max_tokens;
    if (!out.empty() && rng() % 6 == 0) {
      // An exact repeat (a retried request): its whole prompt may be cached.
      p.prompt_token_ids = out[rng() % out.size()].prompt_token_ids;
    } else {
      if (rng() % 2 == 0) p.prompt_token_ids = systems[rng() % systems.size()];
      const int32_t extra =
          std::uniform_int_distribution<int32_t>(1, std::max(1, max_prompt / 2))(rng);
      for (int32_t k = 0; k < extra; ++k) p.prompt_token_ids.push_back(tok(rng));
      if (rng() % 3 == 0) {  // block-aligned prompts hit the "never the last block" rule
        const size_t bs = static_cast<size_t>(w.config.block_size);
        p.prompt_token_ids.resize(std::max(bs, p.prompt_token_ids.size() / bs * bs));
      }
    }
    if (static_cast<int32_t>(p.prompt_token_ids.size()) > max_prompt) {
      p.prompt_token_ids.resize(static_cast<size_t>(max_prompt));
      p.max_tokens = std::min(p.max_tokens, max_len - max_prompt);
    }
    p.priority = std::uniform_int_distribution<int32_t>(0, w.max_priority)(rng);
    p.eos_token_ids = {kEos};
    p.ignore_eos = rng() % 4 == 0;
    for (uint32_t k = rng() % 3; k > 0; --k) p.stop_token_ids.push_back(tok(rng));
    out.push_back(std::move(p));
  }
  return out;
}

struct Snapshot {
  RequestStatus status;
  int32_t priority;
  uint64_t arrival;
};

std::tuple<int32_t, int, uint64_t> queue_key(const Snapshot& s) {
  return {s.priority, s.status == RequestStatus::kPreempted ? 0 : 1, s.arrival};
}

std::map<std::string, Snapshot> snapshot(const SimDriver& d) {
  std::map<std::string, Snapshot> snap;
  for (const auto& [id, toks] : d.tokens) {
    const Request* r = d.scheduler.find_request(id);
    if (r) snap[id] = Snapshot{r->status, r->priority, r->arrival_order};
  }
  return snap;
}

void check_step(const Workload& w, const SchedulerOutput& out,
                const std::map<std::string, Snapshot>& before,
                const std::map<std::string, Snapshot>& after) {
  const SchedulerConfig& c = w.config;
  int32_t total = 0;
  for (const auto& s : out.scheduled) {
    ASSERT_GE(s.num_scheduled_tokens, 1);
    if (c.long_prefill_token_threshold > 0) {
      ASSERT_LE(s.num_scheduled_tokens, c.long_prefill_token_threshold);
    }
    total += s.num_scheduled_tokens;
  }
  ASSERT_EQ(total, out.total_num_scheduled_tokens);
  ASSERT_LE(total, c.max_num_batched_tokens);
  ASSERT_LE(static_cast<int32_t>(out.scheduled.size()), c.max_num_seqs);

  std::vector<Snapshot> waiting, running;
  for (const auto& [id, snap] : after) {
    if (snap.status == RequestStatus::kRunning) running.push_back(snap);
    if (snap.status == RequestStatus::kWaiting || snap.status == RequestStatus::kPreempted) {
      waiting.push_back(snap);
    }
  }
  for (const auto& s : out.scheduled) {
    if (!s.newly_admitted) continue;
    for (const Snapshot& wq : waiting) {
      ASSERT_LT(queue_key(before.at(s.request_id)), queue_key(wq))
          << s.request_id << " was admitted ahead of a request queued before it";
    }
  }
  const std::set<std::string> preempted(out.preempted_request_ids.begin(),
                                        out.preempted_request_ids.end());
  for (const std::string& v : out.preempted_request_ids) {
    for (const auto& s : out.scheduled) {
      ASSERT_FALSE(preempted.contains(s.request_id)) << s.request_id;
      const Snapshot& vs = after.at(v);
      const Snapshot& ss = after.at(s.request_id);
      ASSERT_GT(std::tie(vs.priority, vs.arrival), std::tie(ss.priority, ss.arrival))
          << v << " was preempted for " << s.request_id;
    }
  }
  const bool budget_used = total == c.max_num_batched_tokens;
  if (!budget_used && preempted.empty()) {
    for (const Snapshot& wq : waiting) {
      for (const Snapshot& r : running) {
        ASSERT_LE(r.priority, wq.priority) << "a lower-priority request keeps memory or a "
                                              "slot a higher-priority waiting one needs";
      }
    }
  }
}

void run_workload(const Workload& w, uint32_t seed) {
  SCOPED_TRACE(std::string(w.name) + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<RequestParams> requests = make_requests(w, rng);
  Scheduler s = make(w.config);
  SimDriver d(s, kVocab);
  std::set<std::string> aborted;
  std::map<std::string, std::vector<int32_t>> tables;  // last block table of running requests
  size_t next = 0;
  int steps = 0;
  while (next < requests.size() || s.has_unfinished_requests()) {
    ASSERT_LT(++steps, 20000) << "no progress";
    for (int k = static_cast<int>(rng() % 4); k > 0 && next < requests.size(); --k) {
      const Status st = d.add(requests[next++]);
      ASSERT_TRUE(st.ok()) << st.message();
    }
    if (!d.tokens.empty() && std::bernoulli_distribution(w.abort_per_step)(rng)) {
      auto it = std::next(d.tokens.begin(), static_cast<long>(rng() % d.tokens.size()));
      const std::string id = it->first;
      ASSERT_TRUE(s.abort(id).ok());
      aborted.insert(id);
      d.tokens.erase(id);
      tables.erase(id);
    }
    const auto before = snapshot(d);
    const SchedulerOutput out = s.schedule();
    check_step(w, out, before, snapshot(d));
    if (::testing::Test::HasFatalFailure()) return;
    for (const std::string& v : out.preempted_request_ids) tables.erase(v);
    for (const auto& sr : out.scheduled) {
      auto it = tables.find(sr.request_id);
      if (!sr.newly_admitted) {
        ASSERT_NE(it, tables.end()) << sr.request_id << " runs without being admitted";
        ASSERT_TRUE(std::equal(it->second.begin(), it->second.end(), sr.block_table.begin()))
            << sr.request_id << "'s block table changed instead of growing";
      }
      tables[sr.request_id] = sr.block_table;
    }
    d.step_with(out);
    if (::testing::Test::HasFatalFailure()) return;
    for (const auto& [id, st] : d.final_status) tables.erase(id);
  }
  int finished = 0;
  for (const RequestParams& p : requests) {
    if (aborted.contains(p.request_id)) continue;
    ++finished;
    ASSERT_TRUE(d.final_status.contains(p.request_id)) << p.request_id;
    const RequestStatus st = d.final_status.at(p.request_id);
    ASSERT_TRUE(st == RequestStatus::kFinishedStopped || st == RequestStatus::kFinishedLength)
        << p.request_id << " ended " << to_string(st);
    ASSERT_EQ(d.outputs.at(p.request_id), reference_generate(p, kVocab)) << p.request_id;
  }
  EXPECT_GE(finished, 10);  // enough survive the aborts for the comparison to mean something
  const SchedulerStats stats = s.stats();
  if (w.expect_preemption) {
    EXPECT_GT(stats.num_preemptions_total, 0);
  }
  if (w.config.enable_prefix_caching) {
    EXPECT_GT(stats.prefix_cache_hits, 0);
  }
  if (seed == 1)
    std::printf(
        "%s seed %u: %d steps, %lld preemptions, prefix hits %lld/%lld tokens, %zu aborted\n",
        w.name, seed, steps, (long long)stats.num_preemptions_total,
        (long long)stats.prefix_cache_hits, (long long)stats.prefix_cache_queries, aborted.size());
  EXPECT_EQ(s.block_pool().num_in_use_blocks(), 0);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
  EXPECT_TRUE(s.check_integrity().ok());
}

const Workload kWorkloads[] = {
    // Memory far below demand: constant preemption, priorities compete for blocks.
    {"tiny-pool", cfg(10, 4, 16, 4, 40, 0, true), 60, 2, 0.0, true},
    {"tiny-pool-no-prefix-cache", cfg(10, 4, 16, 4, 40, 0, false), 60, 2, 0.0, true},
    {"tiny-pool-aborts", cfg(12, 4, 24, 5, 48, 8, true), 60, 3, 0.15, true},
    // Moderate pressure, chunked prefill with a per-request cap, sequence-slot limits.
    {"medium", cfg(40, 8, 64, 6, 128, 16, true), 80, 2, 0.0, true},
    {"block-size-1", cfg(40, 1, 12, 6, 40, 0, true), 50, 1, 0.05, true},
    // Plenty of memory: the budget and slots are the only limits.
    {"roomy", cfg(600, 16, 128, 16, 256, 0, true), 80, 2, 0.02, false},
};

TEST(SchedulerProperty, RandomWorkloadsKeepInvariantsAndMatchSoloOutputs) {
  // KITE_SCHED_SOAK_SEEDS=N runs N seeds per workload (a soak); the default keeps CI fast.
  const char* soak = std::getenv("KITE_SCHED_SOAK_SEEDS");
  const uint32_t num_seeds = soak ? static_cast<uint32_t>(std::max(1, std::atoi(soak))) : 4u;
  for (const Workload& w : kWorkloads) {
    for (uint32_t seed = 1; seed <= num_seeds; ++seed) {
      run_workload(w, seed);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// The reference the property test compares against is the request run alone: check that
// literally, one request per fresh scheduler.
TEST(SchedulerProperty, ReferenceEqualsRunningEachRequestAlone) {
  const Workload& w = kWorkloads[3];
  std::mt19937 rng(99);
  for (const RequestParams& p : make_requests(w, rng)) {
    Scheduler s = make(w.config);
    SimDriver d(s, kVocab);
    ASSERT_TRUE(d.add(p).ok());
    for (int i = 0; i < 1000 && s.has_unfinished_requests(); ++i) d.step();
    ASSERT_FALSE(s.has_unfinished_requests());
    EXPECT_EQ(d.outputs.at(p.request_id), reference_generate(p, kVocab)) << p.request_id;
  }
}

}  // namespace
}  // namespace kite::sched
