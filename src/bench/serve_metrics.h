// Aggregate metrics of one serving-benchmark run (one request rate), from the per-request
// results: the numbers vLLM's benchmark_serving prints, in the same units.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "bench/openai_stream.h"
#include "bench/stats.h"

namespace kite::bench {

// Service-level objectives; a request is "good" when it meets every one that is set.
struct SloConfig {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2e_ms;

  bool any() const { return ttft_ms || tpot_ms || e2e_ms; }
};

bool meets_slo(const RequestResult& r, const SloConfig& slo);

struct ServeMetrics {
  int64_t completed = 0;  // successful requests
  int64_t failed = 0;
  double duration_s = 0;           // first send to last completion
  int64_t total_input_tokens = 0;  // successful requests only
  int64_t total_output_tokens = 0;
  double request_throughput = 0;      // completed / duration (req/s)
  double output_throughput = 0;       // output tokens / duration (tok/s)
  double total_token_throughput = 0;  // (input + output) / duration (tok/s)
  int64_t good_requests = 0;
  std::optional<double> goodput;             // good requests / duration (req/s), when an SLO is set
  Summary ttft_ms, tpot_ms, itl_ms, e2e_ms;  // over successful requests (TPOT: >= 2 tokens)
  std::vector<std::string> first_errors;     // up to 5 distinct messages, for the report

  nlohmann::json to_json() const;
};

ServeMetrics compute_serve_metrics(const std::vector<RequestResult>& results, double duration_s,
                                   const SloConfig& slo);

}  // namespace kite::bench
