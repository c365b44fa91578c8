// Scheduler::check_integrity: cross-checks the requests' view of the KV cache against the
// block pool's. Called by tests after every step and by the engine when idle.
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace kite::sched {

namespace {
Status violation(const std::string& what) {
  return internal_error("scheduler integrity violated: " + what);
}
}  // namespace

Status Scheduler::check_integrity() const {
  KITE_RETURN_IF_ERROR(pool_.check_integrity());
  if (requests_.size() != waiting_.size() + running_.size()) {
    return violation(std::to_string(requests_.size()) + " requests but " +
                     std::to_string(waiting_.size()) + " waiting + " +
                     std::to_string(running_.size()) + " running");
  }
  if (num_running() > config_.max_num_seqs)
    return violation("more running requests than max_num_seqs");
  int32_t num_preempted = 0;
  for (const auto& [key, r] : waiting_) {
    if (r->status != RequestStatus::kWaiting && r->status != RequestStatus::kPreempted) {
      return violation("request '" + r->id + "' is queued with status " +
                       std::string(to_string(r->status)));
    }
    if (!(waiting_key(*r) == key))
      return violation("request '" + r->id + "' is queued out of order");
    if (!r->block_table.empty() || r->num_computed_tokens != 0) {
      return violation("queued request '" + r->id + "' holds KV blocks or computed tokens");
    }
    num_preempted += r->status == RequestStatus::kPreempted ? 1 : 0;
  }
  if (num_preempted != num_preempted_waiting_) return violation("preempted count is stale");

  std::vector<int32_t> refs(static_cast<size_t>(pool_.num_blocks()), 0);
  for (size_t i = 0; i < running_.size(); ++i) {
    const Request& r = *running_[i];
    if (i > 0 && !runs_before(running_[i - 1], &r)) return violation("running list is unsorted");
    if (r.status != RequestStatus::kRunning) {
      return violation("request '" + r.id + "' is running with status " +
                       std::string(to_string(r.status)));
    }
    if (r.num_computed_tokens >= r.num_tokens() ||
        static_cast<int64_t>(r.block_table.size()) * config_.block_size < r.num_computed_tokens) {
      return violation("request '" + r.id + "' has inconsistent token counters or block table");
    }
    for (int32_t id : r.block_table) {
      if (id < 0 || id >= pool_.num_blocks()) {
        return violation("request '" + r.id + "' holds invalid block " + std::to_string(id));
      }
      ++refs[static_cast<size_t>(id)];
    }
  }
  for (int32_t id = 0; id < pool_.num_blocks(); ++id) {
    if (refs[static_cast<size_t>(id)] != pool_.ref_count(id)) {
      return violation("block " + std::to_string(id) + " has ref_count " +
                       std::to_string(pool_.ref_count(id)) + " but " +
                       std::to_string(refs[static_cast<size_t>(id)]) + " block tables hold it");
    }
  }
  return ok_status();
}

}  // namespace kite::sched
