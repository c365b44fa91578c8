// Request: one generation request as the scheduler sees it — token ids and counters, no text,
// no sampling parameters (the runner keeps those by request id).
//
// One counter model (vLLM v1): a request is `all_token_ids` (prompt, then outputs) of which the
// first `num_computed_tokens` have KV in the cache. A step computes some of the rest; a prefill
// is simply a request with many uncomputed tokens, a decode one with exactly one (the last
// sampled token). Invariants while not finished:
//   0 <= num_computed_tokens < num_tokens()   (at least the newest token still needs its KV)
//   running:  block_table covers >= num_computed_tokens positions and only grows;
//   waiting / preempted: block_table is empty and num_computed_tokens == 0.
// Created by Scheduler::add_request, mutated only by the Scheduler (engine thread).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/block_hash.h"

namespace kite::sched {

enum class RequestStatus : uint8_t {
  kWaiting,          // queued, never admitted
  kRunning,          // holds KV blocks, scheduled every step it fits the token budget
  kPreempted,        // lost its blocks to memory pressure; queued to recompute prompt+output
  kFinishedStopped,  // sampled EOS or one of its stop tokens
  kFinishedLength,   // reached max_tokens
  kFinishedAborted,  // cancelled (client gone, stop string matched by the engine, ...)
  kFinishedError,  // cannot be served (see Request::error_message), e.g. does not fit the KV cache
};

bool is_finished(RequestStatus status);
std::string_view to_string(RequestStatus status);

// What a caller supplies to Scheduler::add_request.
struct RequestParams {
  std::string request_id;                 // unique among unfinished requests
  std::vector<int32_t> prompt_token_ids;  // non-empty
  int32_t max_tokens = 16;                // output tokens at most (>= 1)
  int32_t priority = 0;                   // lower is served first; ties by arrival
  std::vector<int32_t> stop_token_ids;    // finish (stopped) when one is sampled; kept in output
  std::vector<int32_t> eos_token_ids;     // the model's EOS ids; ignored when ignore_eos
  bool ignore_eos = false;                // benchmarks: always generate max_tokens
};

struct Request {
  std::string id;
  std::vector<int32_t> all_token_ids;  // prompt followed by outputs
  int32_t num_prompt_tokens = 0;
  int32_t max_tokens = 0;
  int32_t priority = 0;
  uint64_t arrival_order = 0;  // assigned by the scheduler, strictly increasing
  std::vector<int32_t> stop_token_ids;
  std::vector<int32_t> eos_token_ids;
  bool ignore_eos = false;

  RequestStatus status = RequestStatus::kWaiting;
  int32_t num_computed_tokens = 0;   // prefix of all_token_ids whose KV is in block_table
  std::vector<int32_t> block_table;  // block ids, position p lives in block_table[p / block_size]
  int32_t num_cached_tokens = 0;     // prefix-cache hit at first admission (usage / metrics)
  int32_t num_preemptions = 0;
  std::string error_message;  // set with kFinishedError

  // Scheduler bookkeeping for prefix caching.
  std::vector<cache::BlockHash> block_hashes;  // hashes of the full blocks of all_token_ids
  int32_t num_registered_blocks = 0;  // block_table[0, this) have been offered to the cache
  uint64_t preempted_at_step = 0;     // step of the latest preemption (0: never)

  int32_t num_tokens() const { return static_cast<int32_t>(all_token_ids.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt_token_ids() const {
    return std::span<const int32_t>(all_token_ids).first(static_cast<size_t>(num_prompt_tokens));
  }
  std::span<const int32_t> output_token_ids() const {
    return std::span<const int32_t>(all_token_ids).subspan(static_cast<size_t>(num_prompt_tokens));
  }
};

}  // namespace kite::sched
