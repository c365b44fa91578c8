// Metrics: the server's Prometheus counters and histograms, rendered for GET /metrics in the
// text exposition format (version 0.0.4; `promtool check metrics` clean).
//
// Recording is thread-safe (any io thread records; atomics for counters, a mutex per
// histogram). Gauges are not stored here: render() takes the engine's SchedulerStats snapshot.
// Names follow vLLM's (vllm:* -> kite_*), with units in the name and _total on counters.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "sched/scheduler_output.h"

namespace kite::server {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends HELP, TYPE, the cumulative _bucket lines (ending with le="+Inf"), _sum and _count.
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Why a generation request did not succeed (label `reason` of kite_request_failure_total).
enum class FailureReason { kBadRequest, kQueueFull, kUnavailable, kClientAborted, kEngineError };
inline constexpr int kNumFailureReasons = 5;
const char* failure_reason_name(FailureReason r);

class Metrics {
 public:
  Metrics();

  void observe_time_to_first_token(double seconds) { ttft_.observe(seconds); }
  void observe_time_per_output_token(double seconds) { tpot_.observe(seconds); }
  // A request (one engine sequence) ended with finish_reason "stop" or "length".
  void record_success(bool stopped, double e2e_seconds, int64_t prompt_tokens,
                      int64_t output_tokens);
  // A request ended otherwise (also counts its tokens, which did use the engine).
  void record_failure(FailureReason reason, int64_t prompt_tokens = 0, int64_t output_tokens = 0);

  std::string render(const sched::SchedulerStats& stats, int64_t in_flight_http_requests) const;

 private:
  std::atomic<int64_t> prompt_tokens_{0};
  std::atomic<int64_t> generation_tokens_{0};
  std::atomic<int64_t> success_stop_{0};
  std::atomic<int64_t> success_length_{0};
  std::array<std::atomic<int64_t>, kNumFailureReasons> failures_{};
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
};

}  // namespace kite::server
