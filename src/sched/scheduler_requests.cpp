// Scheduler: request lifecycle — admission control, update() after a step, finishing,
// aborting, stats and the integrity check.
#include <algorithm>
#include <string>
#include <utility>

#include "sched/scheduler.h"

namespace kite::sched {

namespace {
bool contains(const std::vector<int32_t>& ids, int32_t token_id) {
  return std::find(ids.begin(), ids.end(), token_id) != ids.end();
}
}  // namespace

Status Scheduler::validate(const RequestParams& p) const {
  if (p.request_id.empty()) return invalid_argument("request id must not be empty");
  if (requests_.contains(p.request_id)) {
    return invalid_argument("request id '" + p.request_id + "' is already in use");
  }
  if (p.prompt_token_ids.empty()) {
    return invalid_argument("request '" + p.request_id +
                            "': the prompt is empty; at least one token is required");
  }
  if (p.max_tokens < 1) {
    return invalid_argument("request '" + p.request_id + "': max_tokens must be >= 1, got " +
                            std::to_string(p.max_tokens));
  }
  const int64_t num_prompt = static_cast<int64_t>(p.prompt_token_ids.size());
  if (num_prompt + p.max_tokens > config_.max_model_len) {
    return invalid_argument(
        "request '" + p.request_id + "': prompt (" + std::to_string(num_prompt) +
        " tokens) + max_tokens (" + std::to_string(p.max_tokens) +
        ") = " + std::to_string(num_prompt + p.max_tokens) +
        " exceeds the model's context length max_model_len=" +
        std::to_string(config_.max_model_len) + "; shorten the prompt or lower max_tokens");
  }
  // The prompt's KV alone must fit the cache, or the request could never run.
  if (num_prompt > static_cast<int64_t>(pool_.num_blocks()) * config_.block_size) {
    return invalid_argument(
        "request '" + p.request_id + "': the prompt (" + std::to_string(num_prompt) +
        " tokens) is larger than the whole KV cache (" + std::to_string(pool_.num_blocks()) +
        " blocks of " + std::to_string(config_.block_size) + " tokens)");
  }
  if (num_waiting() >= config_.max_waiting) {
    return Status(ErrorCode::kResourceExhausted, "the waiting queue is full (" +
                                                     std::to_string(config_.max_waiting) +
                                                     " requests); retry later");
  }
  return ok_status();
}

Status Scheduler::add_request(RequestParams params) {
  KITE_RETURN_IF_ERROR(validate(params));
  auto r = std::make_unique<Request>();
  r->id = std::move(params.request_id);
  r->num_prompt_tokens = static_cast<int32_t>(params.prompt_token_ids.size());
  r->all_token_ids = std::move(params.prompt_token_ids);
  r->max_tokens = params.max_tokens;
  r->priority = params.priority;
  r->arrival_order = ++next_arrival_order_;
  r->stop_token_ids = std::move(params.stop_token_ids);
  r->eos_token_ids = std::move(params.eos_token_ids);
  r->ignore_eos = params.ignore_eos;
  r->status = RequestStatus::kWaiting;
  waiting_.emplace(waiting_key(*r), r.get());
  std::string id = r->id;
  requests_.emplace(std::move(id), std::move(r));
  return ok_status();
}

Result<std::vector<RequestStepOutput>> Scheduler::update(
    const SchedulerOutput& output, std::span<const int32_t> sampled_token_ids) {
  if (!in_flight_ || output.step_id != step_id_) {
    return invalid_argument("update() got the output of step " + std::to_string(output.step_id) +
                            " but the step in flight is " +
                            (in_flight_ ? std::to_string(step_id_) : std::string("none")) +
                            "; call update() exactly once after each schedule()");
  }
  if (sampled_token_ids.size() != plan_.size() || output.scheduled.size() != plan_.size()) {
    return invalid_argument("update() needs one sampled token per scheduled request (" +
                            std::to_string(plan_.size()) + "), got " +
                            std::to_string(sampled_token_ids.size()));
  }
  in_flight_ = false;
  std::vector<RequestStepOutput> events = std::move(pending_events_);
  pending_events_.clear();
  events.reserve(events.size() + plan_.size());
  bool any_finished = false;
  for (size_t i = 0; i < plan_.size(); ++i) {
    Request& r = *plan_[i].request;
    r.num_computed_tokens += plan_[i].num_tokens;
    register_full_blocks(r);
    if (r.num_computed_tokens < r.num_tokens()) continue;  // partial prefill: no token
    r.all_token_ids.push_back(sampled_token_ids[i]);
    const RequestStatus status = stop_status(r);
    events.push_back(
        RequestStepOutput{r.id, sampled_token_ids[i], status, r.num_cached_tokens, {}});
    if (is_finished(status)) {
      release(r, status);
      any_finished = true;
    }
  }
  plan_.clear();
  if (any_finished) erase_finished_running();
  for (const std::string& id : pending_aborts_) apply_abort(id);
  pending_aborts_.clear();
  return events;
}

// Offers the request's newly completed blocks to the prefix cache. Only blocks whose every
// token has been computed qualify: their KV is final once this step's forward has run.
void Scheduler::register_full_blocks(Request& r) {
  if (!config_.enable_prefix_caching) return;
  const int32_t num_full = r.num_computed_tokens / config_.block_size;
  if (num_full <= r.num_registered_blocks) return;
  cache::extend_block_hashes(root_hash_, r.all_token_ids, config_.block_size, r.block_hashes);
  for (int32_t j = r.num_registered_blocks; j < num_full; ++j) {
    // False when another request already cached this prefix: this copy then stays private.
    (void)pool_.cache_block(r.block_table[static_cast<size_t>(j)],
                            r.block_hashes[static_cast<size_t>(j)]);
  }
  r.num_registered_blocks = num_full;
}

RequestStatus Scheduler::stop_status(const Request& r) const {
  const int32_t last = r.all_token_ids.back();
  if (contains(r.stop_token_ids, last)) return RequestStatus::kFinishedStopped;
  if (!r.ignore_eos && contains(r.eos_token_ids, last)) return RequestStatus::kFinishedStopped;
  if (r.num_output_tokens() >= r.max_tokens) return RequestStatus::kFinishedLength;
  return RequestStatus::kRunning;
}

// Releases r's blocks and marks it finished; the caller unlinks it from queues and requests_.
void Scheduler::release(Request& r, RequestStatus final_status) {
  pool_.free_blocks(r.block_table);
  r.block_table.clear();
  r.status = final_status;
  finished_since_schedule_.push_back(r.id);
}

void Scheduler::erase_finished_running() {
  std::vector<std::string> finished;
  std::erase_if(running_, [&](const Request* r) {
    if (!is_finished(r->status)) return false;
    finished.push_back(r->id);
    return true;
  });
  for (const std::string& id : finished) requests_.erase(id);
}

// Fails a request that can never fit (inside schedule(); never one in the current plan).
void Scheduler::fail(Request& r, std::string message) {
  if (r.status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &r));
  } else {
    waiting_.erase(waiting_key(r));
    if (r.status == RequestStatus::kPreempted) --num_preempted_waiting_;
  }
  release(r, RequestStatus::kFinishedError);
  pending_events_.push_back(RequestStepOutput{r.id, std::nullopt, RequestStatus::kFinishedError,
                                              r.num_cached_tokens, std::move(message)});
  const std::string id = r.id;  // r is destroyed by the erase
  requests_.erase(id);
}

Status Scheduler::abort(const std::string& request_id) {
  if (!requests_.contains(request_id)) {
    return not_found("request '" + request_id + "' is not queued or running (finished already?)");
  }
  if (in_flight_) {
    pending_aborts_.push_back(request_id);
  } else {
    apply_abort(request_id);
  }
  return ok_status();
}

void Scheduler::apply_abort(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;  // finished in the step the abort waited for
  Request& r = *it->second;
  if (r.status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &r));
  } else {
    waiting_.erase(waiting_key(r));
    if (r.status == RequestStatus::kPreempted) --num_preempted_waiting_;
  }
  release(r, RequestStatus::kFinishedAborted);
  requests_.erase(it);
}

const Request* Scheduler::find_request(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? nullptr : it->second.get();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = num_running();
  s.num_waiting = num_waiting();
  s.num_preempted = num_preempted_waiting_;
  s.kv_cache_usage = pool_.usage();
  s.prefix_cache_queries = prefix_cache_queries_;
  s.prefix_cache_hits = prefix_cache_hits_;
  s.num_preemptions_total = num_preemptions_total_;
  return s;
}

}  // namespace kite::sched
