#include "bench/arrivals.h"

#include <cmath>
#include <random>
#include <string>

namespace kite::bench {

Result<std::vector<double>> arrival_offsets_s(const ArrivalConfig& c, int64_t num_requests) {
  if (!(c.request_rate > 0))
    return invalid_argument("--request-rate must be > 0 (or inf), got " +
                            std::to_string(c.request_rate));
  if (!(c.burstiness > 0) || std::isinf(c.burstiness))
    return invalid_argument("--burstiness must be a finite number > 0, got " +
                            std::to_string(c.burstiness));
  if (num_requests < 0) return invalid_argument("negative number of requests");
  std::vector<double> offsets(static_cast<size_t>(num_requests), 0.0);
  if (std::isinf(c.request_rate)) return offsets;
  std::mt19937_64 rng(c.seed);
  std::gamma_distribution<double> gap(c.burstiness, 1.0 / (c.request_rate * c.burstiness));
  double t = 0;
  for (size_t i = 1; i < offsets.size(); ++i) {
    t += gap(rng);
    offsets[i] = t;
  }
  return offsets;
}

}  // namespace kite::bench
