// Scheduler: construction and the two phases of schedule(). Request lifecycle (add, abort,
// update, finish) lives in scheduler_requests.cpp.
#include "sched/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

namespace kite::sched {

namespace {
Status require_positive(const char* name, int32_t value) {
  if (value > 0) return ok_status();
  return invalid_argument(std::string("scheduler config: ") + name + " must be positive, got " +
                          std::to_string(value));
}
}  // namespace

Result<Scheduler> Scheduler::create(const SchedulerConfig& config) {
  KITE_RETURN_IF_ERROR(require_positive("max_num_batched_tokens", config.max_num_batched_tokens));
  KITE_RETURN_IF_ERROR(require_positive("max_num_seqs", config.max_num_seqs));
  KITE_RETURN_IF_ERROR(require_positive("max_model_len", config.max_model_len));
  KITE_RETURN_IF_ERROR(require_positive("max_waiting", config.max_waiting));
  if (config.long_prefill_token_threshold < 0) {
    return invalid_argument(
        "scheduler config: long_prefill_token_threshold must be >= 0 (0 = off)");
  }
  KITE_ASSIGN_OR_RETURN(
      cache::BlockPool pool,
      cache::BlockPool::create({.num_blocks = config.num_blocks, .block_size = config.block_size}));
  return Scheduler(config, std::move(pool));
}

Scheduler::Scheduler(const SchedulerConfig& config, cache::BlockPool pool)
    : config_(config),
      pool_(std::move(pool)),
      root_hash_(cache::root_block_hash(config.prefix_cache_salt)) {
  running_.reserve(static_cast<size_t>(config.max_num_seqs));
}

Scheduler::WaitingKey Scheduler::waiting_key(const Request& r) {
  const uint8_t fresh = r.status == RequestStatus::kPreempted ? 0 : 1;
  return WaitingKey{r.priority, fresh, r.arrival_order};
}

bool Scheduler::runs_before(const Request* a, const Request* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->arrival_order < b->arrival_order;
}

SchedulerOutput Scheduler::schedule() {
  // A schedule() not followed by update() is replanned: nothing was computed, and blocks
  // allocated for it are simply reused.
  plan_.clear();
  in_flight_ = false;
  for (const std::string& id : pending_aborts_) apply_abort(id);
  pending_aborts_.clear();

  ++step_id_;
  int32_t budget = config_.max_num_batched_tokens;
  // After a memory preemption, admitting waiting requests would only thrash: the memory that
  // was just freed is needed by the running requests next step.
  if (!schedule_running(budget)) schedule_waiting(budget);
  in_flight_ = true;
  return build_output();
}

int32_t Scheduler::chunk_size(int32_t num_uncomputed_tokens, int32_t budget) const {
  int32_t n = std::min(num_uncomputed_tokens, budget);
  if (config_.long_prefill_token_threshold > 0) {
    n = std::min(n, config_.long_prefill_token_threshold);
  }
  return n;
}

int32_t Scheduler::blocks_for(int32_t num_tokens) const {
  return (num_tokens + config_.block_size - 1) / config_.block_size;
}

bool Scheduler::try_allocate(Request& r, int32_t num_new_tokens) {
  const int32_t needed = blocks_for(r.num_computed_tokens + num_new_tokens) -
                         static_cast<int32_t>(r.block_table.size());
  return needed <= 0 || pool_.allocate(needed, r.block_table);
}

std::string Scheduler::capacity_error(const Request& r, int32_t num_tokens) const {
  return "request '" + r.id + "' needs " + std::to_string(blocks_for(num_tokens)) +
         " KV blocks for " + std::to_string(num_tokens) + " tokens, but the whole KV cache has " +
         std::to_string(pool_.num_blocks()) + " blocks of " + std::to_string(config_.block_size) +
         " tokens; lower max_tokens or give the KV cache more memory";
}

// Phase 1. Returns whether it preempted (or failed) a request for lack of memory.
bool Scheduler::schedule_running(int32_t& budget) {
  bool preempted_any = false;
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    Request& r = *running_[i];
    const int32_t n = chunk_size(r.num_tokens() - r.num_computed_tokens, budget);
    bool scheduled = true;
    while (!try_allocate(r, n)) {
      preempted_any = true;
      if (running_.size() == 1) {
        // Every other request is already preempted: r cannot grow however long it waits.
        fail(r, capacity_error(r, r.num_computed_tokens + n));
        scheduled = false;
        break;
      }
      // running_ is sorted, so back() is the lowest-priority, newest request: never one
      // that phase 1 has already scheduled (those sort before r).
      const bool victim_is_r = running_.back() == &r;
      preempt_last_running(budget);
      if (victim_is_r) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) break;  // r was the last running request
    plan_.push_back(PlannedRun{&r, n, false});
    budget -= n;
    ++i;
  }
  return preempted_any;
}

// Phase 2: admit waiting requests, head of line first.
void Scheduler::schedule_waiting(int32_t& budget) {
  while (!waiting_.empty() && budget > 0) {
    Request& r = *waiting_.begin()->second;
    // A request preempted in this very step would only thrash; stop the line behind it.
    if (r.preempted_at_step == step_id_) return;
    if (num_running() >= config_.max_num_seqs && !preempt_lower_priority_than(r, budget)) return;

    const std::vector<int32_t> cached_blocks = match_prefix(r);
    const int32_t num_cached_tokens =
        static_cast<int32_t>(cached_blocks.size()) * config_.block_size;
    const int32_t num_uncomputed = r.num_tokens() - num_cached_tokens;
    while (!fits(cached_blocks, chunk_size(num_uncomputed, budget))) {
      if (!preempt_lower_priority_than(r, budget)) break;
    }
    if (!fits(cached_blocks, chunk_size(num_uncomputed, budget))) {
      if (!running_.empty()) return;  // wait for running requests to finish
      // The whole cache is allocatable and the chunk still does not fit: neither will the
      // rest of the request.
      fail(r, capacity_error(r, r.num_tokens()));
      continue;
    }
    if (!admit(r, cached_blocks, chunk_size(num_uncomputed, budget), budget)) return;
  }
}

std::vector<int32_t> Scheduler::match_prefix(Request& r) {
  std::vector<int32_t> block_ids;
  if (!config_.enable_prefix_caching) return block_ids;
  cache::extend_block_hashes(root_hash_, r.all_token_ids, config_.block_size, r.block_hashes);
  // Never reuse the block holding the last token: at least one token must be computed so the
  // step produces logits to sample from.
  const size_t max_blocks = std::min(static_cast<size_t>((r.num_tokens() - 1) / config_.block_size),
                                     r.block_hashes.size());
  for (size_t j = 0; j < max_blocks; ++j) {
    const std::optional<int32_t> block_id = pool_.lookup(r.block_hashes[j]);
    if (!block_id) break;
    block_ids.push_back(*block_id);
  }
  return block_ids;
}

bool Scheduler::fits(const std::vector<int32_t>& cached_blocks, int32_t num_new_tokens) const {
  const int32_t num_cached = static_cast<int32_t>(cached_blocks.size());
  const int32_t new_blocks =
      blocks_for(num_cached * config_.block_size + num_new_tokens) - num_cached;
  // Reviving an unreferenced cached block takes it out of the allocatable pool too.
  int32_t revived = 0;
  for (int32_t id : cached_blocks) revived += pool_.ref_count(id) == 0 ? 1 : 0;
  return new_blocks + revived <= pool_.num_allocatable_blocks();
}

bool Scheduler::admit(Request& r, const std::vector<int32_t>& cached_blocks, int32_t num_new_tokens,
                      int32_t& budget) {
  // Share the cached prefix before allocating, so allocation cannot evict it.
  for (int32_t id : cached_blocks) pool_.incref(id);
  r.block_table = cached_blocks;
  r.num_computed_tokens = static_cast<int32_t>(cached_blocks.size()) * config_.block_size;
  if (!try_allocate(r, num_new_tokens)) {  // unreachable after fits(); undo rather than corrupt
    pool_.free_blocks(r.block_table);
    r.block_table.clear();
    r.num_computed_tokens = 0;
    return false;
  }
  waiting_.erase(waiting_key(r));
  if (r.status == RequestStatus::kPreempted) --num_preempted_waiting_;
  r.num_registered_blocks = static_cast<int32_t>(cached_blocks.size());
  prefix_cache_queries_ += r.num_tokens();
  prefix_cache_hits_ += r.num_computed_tokens;
  if (r.num_preemptions == 0) r.num_cached_tokens = r.num_computed_tokens;
  r.status = RequestStatus::kRunning;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), &r, runs_before), &r);
  plan_.push_back(PlannedRun{&r, num_new_tokens, true});
  budget -= num_new_tokens;
  return true;
}

bool Scheduler::preempt_lower_priority_than(const Request& r, int32_t& budget) {
  if (running_.empty() || running_.back()->priority <= r.priority) return false;
  preempt_last_running(budget);
  return true;
}

void Scheduler::preempt_last_running(int32_t& budget) {
  Request& victim = *running_.back();
  running_.pop_back();
  // Phase 2 may preempt a request phase 1 already scheduled: take it out of the step.
  for (auto it = plan_.rbegin(); it != plan_.rend(); ++it) {
    if (it->request != &victim) continue;
    budget += it->num_tokens;
    plan_.erase(std::next(it).base());
    break;
  }
  pool_.free_blocks(victim.block_table);  // full blocks stay cached for the resume
  victim.block_table.clear();
  victim.num_computed_tokens = 0;
  victim.num_registered_blocks = 0;
  victim.status = RequestStatus::kPreempted;
  victim.preempted_at_step = step_id_;
  ++victim.num_preemptions;
  ++num_preemptions_total_;
  ++num_preempted_waiting_;
  waiting_.emplace(waiting_key(victim), &victim);
  step_preempted_.push_back(victim.id);
}

SchedulerOutput Scheduler::build_output() {
  SchedulerOutput out;
  out.step_id = step_id_;
  out.scheduled.reserve(plan_.size());
  for (const PlannedRun& p : plan_) {
    const Request& r = *p.request;
    ScheduledRequest& s = out.scheduled.emplace_back();
    s.request_id = r.id;
    s.num_computed_tokens = r.num_computed_tokens;
    s.num_scheduled_tokens = p.num_tokens;
    const auto first = r.all_token_ids.begin() + r.num_computed_tokens;
    s.token_ids.assign(first, first + p.num_tokens);
    s.block_table = r.block_table;
    s.newly_admitted = p.newly_admitted;
    s.samples_token = r.num_computed_tokens + p.num_tokens == r.num_tokens();
    out.total_num_scheduled_tokens += p.num_tokens;
  }
  out.preempted_request_ids = std::move(step_preempted_);
  step_preempted_.clear();
  out.finished_request_ids = std::move(finished_since_schedule_);
  finished_since_schedule_.clear();
  return out;
}

}  // namespace kite::sched
