// The serving benchmark: sends a dataset's prompts to an OpenAI-compatible server as
// streaming requests, on a Poisson/gamma arrival schedule (bench/arrivals.h) and/or under a
// concurrency cap, and measures each response (bench/openai_stream.h).
//
// Timing: a request's clock starts when its body is handed to the client (before connect),
// as in vLLM; requests wait for their arrival time, then for a free concurrency slot.
// Bodies are serialised before the run so JSON work does not delay arrivals.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/arrivals.h"
#include "bench/dataset.h"
#include "bench/http_client.h"
#include "bench/openai_stream.h"
#include "bench/serve_metrics.h"

namespace kite::bench {

struct ServeRunConfig {
  std::string model;  // the "model" field of each request
  Endpoint endpoint = Endpoint::kCompletions;
  double request_rate = 0;  // req/s, +inf: all at once
  double burstiness = 1.0;
  int32_t max_concurrency = 0;  // 0: no cap
  SloConfig slo;
  uint64_t seed = 0;
};

struct ServeRun {
  ServeRunConfig config;
  std::vector<RequestResult> results;  // dataset order
  ServeMetrics metrics;

  // Config, metrics and per-request measurements (times in ms).
  nlohmann::json to_json() const;
};

// One run at one rate. Fails only for invalid settings or bodies; request failures are
// counted in the metrics.
Result<ServeRun> run_serve_benchmark(HttpClient& client, const ServeRunConfig& config,
                                     const std::vector<BenchRequest>& requests);

// GET /v1/models and return the first model id (used when --model is not given).
Result<std::string> fetch_default_model(HttpClient& client);

// Parses "1,2.5,inf" (inf / +inf allowed) into rates > 0.
Result<std::vector<double>> parse_rate_list(const std::string& text);

// The human-readable table of one run, as printed to stdout.
std::string format_serve_run(const ServeRun& run);

}  // namespace kite::bench
