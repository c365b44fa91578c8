// In-process benchmarks over the Engine (no HTTP): `kite bench latency` and
// `kite bench throughput`. Prompts are random token ids (bench/dataset.h), so a model folder
// holding only config.json works with --load-format dummy. Requests use greedy sampling and
// ignore_eos, so every request generates exactly output_len tokens.
#pragma once

#include <nlohmann/json.hpp>

#include "bench/stats.h"
#include "engine/llm.h"

namespace kite::bench {

struct LatencyConfig {
  int32_t input_len = 32;
  int32_t output_len = 128;
  int32_t batch_size = 1;
  int32_t iters = 3;
  int32_t warmup_iters = 1;  // not measured (first-touch of weights and KV pages)
  uint64_t seed = 0;
};

// Per iteration, batch_size requests (fresh random prompts: no prefix-cache hits) are
// queued together. Prefill = time from queueing to the last request's first token (the
// TTFT of the batch; for batch 1 exactly the request's TTFT). Decode = every gap between
// consecutive tokens of the first request that starts at or after the step in which the last
// request got its first token: one engine step each, with no prompt tokens in it. Mixed steps
// are left out and counted in decode_gaps_left_out: when batch x input exceeds
// --max-num-batched-tokens the prompts are prefilled in chunks over several steps while the
// first requests already decode, and a step the engine begins while the batch is still being
// queued prefills the late requests beside the first one's decode.
struct LatencyReport {
  LatencyConfig config;
  Summary prefill_ms;
  Summary decode_ms_per_step;
  int64_t decode_gaps_left_out = 0;  // gaps whose step still had prompt tokens in it
  double weight_bytes_per_step = 0;  // bench/weight_bytes.h
  std::string weight_dtype = "F32";  // of the backend the model ran on
  double decode_gbps_mean = 0;       // weight bytes / mean step time
  double decode_gbps_p50 = 0;        // weight bytes / median step time
  double e2e_ms_mean = 0;            // whole iteration

  nlohmann::json to_json() const;
  std::string format() const;
};

Result<LatencyReport> run_latency_benchmark(Engine& engine, const LatencyConfig& config);

struct ThroughputConfig {
  int32_t input_len = 128;
  int32_t output_len = 128;
  int32_t num_prompts = 64;
  uint64_t seed = 0;
};

// All prompts are submitted at once and the clock stops when the last one finishes.
struct ThroughputReport {
  ThroughputConfig config;
  double elapsed_s = 0;
  int64_t total_prompt_tokens = 0;
  int64_t total_output_tokens = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;

  nlohmann::json to_json() const;
  std::string format() const;
};

Result<ThroughputReport> run_throughput_benchmark(LLM& llm, const ThroughputConfig& config);

// Model description for reports: type, layers, hidden, params, load format.
nlohmann::json describe_model(const Engine& engine);

}  // namespace kite::bench
