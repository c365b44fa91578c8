// SchedulerConfig: every knob of the continuous-batching scheduler and its KV block pool.
#pragma once

#include <cstdint>
#include <string>

namespace kite::sched {

struct SchedulerConfig {
  // KV cache geometry. num_blocks comes from the memory budget (--gpu-memory-utilization).
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // tokens per KV block

  // Per-step limits.
  int32_t max_num_batched_tokens = 2048;  // tokens computed per step, prefill + decode
  int32_t max_num_seqs = 256;             // requests holding KV blocks (running) at once
  // If > 0, one request computes at most this many tokens per step, so several long prompts
  // share a step's budget instead of one taking all of it (chunked prefill fairness).
  int32_t long_prefill_token_threshold = 0;

  // Admission control.
  int32_t max_model_len = 4096;  // prompt + max_tokens must not exceed it
  int32_t max_waiting = 1024;    // queued requests beyond this are refused (HTTP 429)

  // Automatic prefix caching.
  bool enable_prefix_caching = true;
  // Mixed into the root of every hash chain, so caches of different models (or weights,
  // quantizations, LoRAs) never match each other. Use e.g. the model path + dtype.
  std::string prefix_cache_salt;
};

}  // namespace kite::sched
