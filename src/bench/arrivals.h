// Request arrival times for the serving benchmark, as vLLM's benchmark_serving draws them.
//
// Inter-arrival gaps are Gamma(shape = burstiness, scale = 1 / (rate * burstiness)): the mean
// gap is 1/rate whatever the burstiness; burstiness 1 is a Poisson process (exponential gaps),
// < 1 is burstier (coefficient of variation 1/sqrt(burstiness)), > 1 is more regular.
// rate = +inf sends every request at t = 0.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace kite::bench {

struct ArrivalConfig {
  double request_rate = 0;  // requests/s, > 0; +inf allowed
  double burstiness = 1.0;  // gamma shape, > 0
  uint64_t seed = 0;
};

// Offsets in seconds from the start of the run, non-decreasing, first one 0 (vLLM's first
// request also goes out without waiting).
Result<std::vector<double>> arrival_offsets_s(const ArrivalConfig& config, int64_t num_requests);

}  // namespace kite::bench
