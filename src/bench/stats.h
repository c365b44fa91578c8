// Summary statistics for benchmark samples (latencies in ms).
//
// percentile() interpolates linearly between closest ranks, exactly like numpy.percentile's
// default ("linear"), so numbers compare 1:1 with vLLM's benchmark_serving output.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

namespace kite::bench {

// p in [0, 100]; `samples` need not be sorted. Empty input gives 0 (a run where no request
// produced the metric, e.g. TPOT when every output had one token).
double percentile(std::vector<double> samples, double p);

struct Summary {
  int64_t count = 0;
  double mean = 0, std = 0, min = 0, max = 0;
  double p50 = 0, p90 = 0, p99 = 0;

  nlohmann::json to_json() const;
};

Summary summarize(const std::vector<double>& samples);

}  // namespace kite::bench
