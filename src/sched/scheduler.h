// Scheduler: continuous batching over a paged, prefix-sharing KV cache.
//
// Each step (engine thread only):
//   SchedulerOutput out = scheduler.schedule();
//   ... runner computes out, samples one token per request with samples_token ...
//   auto events = scheduler.update(out, sampled_token_ids);   // must follow every schedule()
//
// schedule() works in two phases under a token budget (max_num_batched_tokens):
//  1. Running requests, in (priority, arrival) order: each gets its remaining tokens (1 for a
//     decode, the rest of its prompt for a chunked prefill), capped by the budget left and
//     long_prefill_token_threshold. When blocks run out, the running request with the largest
//     (priority, arrival) — never one ahead of the request in need — is preempted by
//     recompute: its blocks are released (full ones stay cached) and it rejoins the waiting
//     queue at the front of its priority class, keeping its output tokens.
//  2. Only if phase 1 preempted nothing: waiting requests in queue order (priority, preempted
//     first, arrival), strictly head of line (a request never overtakes one ahead of it). Each
//     reuses the longest cached prefix of its tokens (never the block of its last token) and
//     gets a chunk of the rest. If the head lacks blocks or a sequence slot, running requests of
//     strictly lower priority (larger value) are preempted for it, lowest first, even if already
//     scheduled this step (their tokens return to the budget).
// Priority guarantee (tested): after schedule(), if a waiting request has a smaller priority
// value than some running request, then the step's token budget is used up or the step
// preempted something; and every request preempted in a step has a larger (priority, arrival)
// than every request scheduled in it.
// A request that cannot fit the KV cache even with every other request preempted fails
// (kFinishedError, with the reason) instead of looping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_pool.h"
#include "core/status.h"
#include "sched/request.h"
#include "sched/scheduler_config.h"
#include "sched/scheduler_output.h"

namespace kite::sched {

class Scheduler {
 public:
  static Result<Scheduler> create(const SchedulerConfig& config);

  // Queues a request. Errors: kInvalidArgument (empty prompt, prompt + max_tokens over
  // max_model_len, prompt larger than the whole KV cache, duplicate id) -> HTTP 400;
  // kResourceExhausted (waiting queue full) -> HTTP 429.
  Status add_request(RequestParams params);

  // Cancels a request in any unfinished state and releases its blocks. Called between steps
  // it takes effect at once; called between schedule() and update() it takes effect at the
  // end of that update(). kNotFound if the id is unknown (e.g. it already finished).
  Status abort(const std::string& request_id);

  // Plans one step. See the class comment.
  SchedulerOutput schedule();

  // Applies a step's results. `sampled_token_ids[i]` belongs to `output.scheduled[i]` and is
  // read only when its samples_token is set. Returns one entry per request that got a token
  // or finished (including requests failed inside schedule()). kInvalidArgument if `output`
  // is not the latest schedule()'s or the sizes differ; the state is then unchanged.
  Result<std::vector<RequestStepOutput>> update(const SchedulerOutput& output,
                                                std::span<const int32_t> sampled_token_ids);

  bool has_unfinished_requests() const { return !requests_.empty(); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  // nullptr if unknown or finished. Valid until the next mutating call.
  const Request* find_request(const std::string& request_id) const;
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }
  const cache::BlockPool& block_pool() const { return pool_; }

  // Block pool integrity plus request accounting: each block's ref_count equals the number of
  // running block tables holding it; waiting requests hold no blocks; counters agree.
  Status check_integrity() const;

 private:
  // Waiting queue order: priority, then preempted requests first, then arrival.
  struct WaitingKey {
    int32_t priority;
    uint8_t fresh;  // 0 for a preempted request, 1 otherwise
    uint64_t arrival_order;
    auto operator<=>(const WaitingKey&) const = default;
  };
  // One request's share of the step being planned.
  struct PlannedRun {
    Request* request;
    int32_t num_tokens;
    bool newly_admitted;
  };

  explicit Scheduler(const SchedulerConfig& config, cache::BlockPool pool);

  static WaitingKey waiting_key(const Request& r);
  static bool runs_before(const Request* a, const Request* b);

  // schedule() phases (scheduler.cpp).
  bool schedule_running(int32_t& budget);
  void schedule_waiting(int32_t& budget);
  int32_t chunk_size(int32_t num_uncomputed_tokens, int32_t budget) const;
  int32_t blocks_for(int32_t num_tokens) const;
  bool try_allocate(Request& r, int32_t num_new_tokens);
  std::vector<int32_t> match_prefix(Request& r);
  bool fits(const std::vector<int32_t>& cached_blocks, int32_t num_new_tokens) const;
  bool admit(Request& r, const std::vector<int32_t>& cached_blocks, int32_t num_new_tokens,
             int32_t& budget);
  std::string capacity_error(const Request& r, int32_t num_tokens) const;
  bool preempt_lower_priority_than(const Request& r, int32_t& budget);
  void preempt_last_running(int32_t& budget);
  SchedulerOutput build_output();

  // Request lifecycle (scheduler_requests.cpp).
  Status validate(const RequestParams& params) const;
  void register_full_blocks(Request& r);
  RequestStatus stop_status(const Request& r) const;
  void release(Request& r, RequestStatus final_status);
  void fail(Request& r, std::string message);
  void erase_finished_running();
  void apply_abort(const std::string& request_id);

  SchedulerConfig config_;
  cache::BlockPool pool_;
  cache::BlockHash root_hash_;
  uint64_t next_arrival_order_ = 0;
  uint64_t step_id_ = 0;
  bool in_flight_ = false;  // between schedule() and update()

  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;  // every unfinished one
  std::map<WaitingKey, Request*> waiting_;  // waiting and preempted, in service order
  std::vector<Request*> running_;           // sorted by runs_before
  int32_t num_preempted_waiting_ = 0;

  std::vector<PlannedRun> plan_;  // the in-flight step, parallel to SchedulerOutput::scheduled
  std::vector<std::string> step_preempted_;           // ids preempted by this schedule()
  std::vector<std::string> finished_since_schedule_;  // for the next SchedulerOutput
  std::vector<RequestStepOutput> pending_events_;     // failures, reported by update()
  std::vector<std::string> pending_aborts_;           // abort() while in flight

  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
  int64_t num_preemptions_total_ = 0;
};

}  // namespace kite::sched
