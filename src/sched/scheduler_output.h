// SchedulerOutput: what one step computes, as plain data (no tensors, no pointers).
//
// The model runner turns it into device inputs: flattened token ids, positions
// (num_computed_tokens + i), slot mapping (block_table[pos / block_size] * block_size +
// pos % block_size), block tables and sequence lengths. Then it samples one token for every
// scheduled request with `samples_token` and hands them back to Scheduler::update().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sched/request.h"

namespace kite::sched {

// One request's share of a step.
struct ScheduledRequest {
  // The request's id, as given to add_request.
  std::string request_id;
  // Tokens whose KV is already in the cache before this step; also the position of the first
  // fed token. 0 for a request computing from scratch; for a prefix-cache hit, the number of
  // reused tokens (a multiple of block_size).
  int32_t num_computed_tokens = 0;
  // Tokens computed this step (1 for a decode, a chunk for a prefill); always >= 1.
  int32_t num_scheduled_tokens = 0;
  // The tokens to feed: all_token_ids[num_computed_tokens, + num_scheduled_tokens). For a new
  // request a prompt chunk; for one resumed after preemption a chunk of prompt+output; for a
  // decode the last sampled token. size() == num_scheduled_tokens.
  std::vector<int32_t> token_ids;
  // Full copy of the request's block table after this step's allocation; covers every position
  // < num_computed_tokens + num_scheduled_tokens. Tables only grow while a request runs, so a
  // runner keeping its own copy may append the tail; it must rebuild it when newly_admitted.
  std::vector<int32_t> block_table;
  // True when the request entered the running set this step (fresh, or resumed after a
  // preemption): the runner must (re)create whatever per-request state it keeps.
  bool newly_admitted = false;
  // True when this step computes the request's last uncomputed token, so the logits of that
  // token must be sampled. False for a partial prefill chunk (its logits are not needed).
  bool samples_token = false;
};

struct SchedulerOutput {
  // Increases by one per schedule(); update() checks it to catch a stale output.
  uint64_t step_id = 0;
  // Requests computed this step: running ones in (priority, arrival) order, then the ones
  // admitted this step in queue order. update() expects the sampled tokens in this order. A
  // request never appears here and in preempted_request_ids in the same step.
  std::vector<ScheduledRequest> scheduled;
  // Sum of num_scheduled_tokens; <= max_num_batched_tokens.
  int32_t total_num_scheduled_tokens = 0;
  // Requests preempted in this step: their blocks are gone (full ones may stay cached); the
  // runner drops their state. They come back later with newly_admitted.
  std::vector<std::string> preempted_request_ids;
  // Requests that finished, failed or were aborted since the previous schedule(): the runner
  // drops their state.
  std::vector<std::string> finished_request_ids;

  bool empty() const { return scheduled.empty(); }
};

// What update() reports per request: a new token and/or a finish. The engine streams these.
struct RequestStepOutput {
  // The request's id.
  std::string request_id;
  // The token sampled this step, already appended to the request's output.
  std::optional<int32_t> new_token_id;
  // kRunning, or the finished status if the request ended this step (then it is gone from the
  // scheduler and its blocks are released).
  RequestStatus status = RequestStatus::kRunning;
  // Prompt tokens served from the prefix cache at first admission (usage.cached_tokens).
  int32_t num_cached_tokens = 0;
  // Why a kFinishedError request could not be served; empty otherwise.
  std::string error_message;
};

// Numbers for /metrics: gauges are point-in-time, counters cumulative since creation.
struct SchedulerStats {
  // Requests holding KV blocks (gauge).
  int32_t num_running = 0;
  // Requests queued, including preempted ones waiting to resume (gauge).
  int32_t num_waiting = 0;
  // Of num_waiting, those that were preempted (gauge).
  int32_t num_preempted = 0;
  // Referenced blocks / all blocks, in [0, 1]; cached-but-unreferenced blocks count as free.
  double kv_cache_usage = 0;
  // Tokens looked up in the prefix cache, one query per admission (counter).
  int64_t prefix_cache_queries = 0;
  // Of those, tokens served from the cache (counter). hits / queries is the hit rate.
  int64_t prefix_cache_hits = 0;
  // Preemptions by recompute (counter).
  int64_t num_preemptions_total = 0;
};

}  // namespace kite::sched
