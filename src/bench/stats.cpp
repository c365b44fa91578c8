#include "bench/stats.h"

#include <algorithm>
#include <cmath>

namespace kite::bench {

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (samples[hi] - samples[lo]) * (rank - static_cast<double>(lo));
}

Summary summarize(const std::vector<double>& samples) {
  Summary s;
  s.count = static_cast<int64_t>(samples.size());
  if (samples.empty()) return s;
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / static_cast<double>(samples.size());
  double sq = 0;
  for (double x : samples) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(samples.size()));  // population std, as numpy
  auto [mn, mx] = std::minmax_element(samples.begin(), samples.end());
  s.min = *mn;
  s.max = *mx;
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  s.p50 = percentile(sorted, 50);
  s.p90 = percentile(sorted, 90);
  s.p99 = percentile(sorted, 99);
  return s;
}

nlohmann::json Summary::to_json() const {
  return {{"count", count}, {"mean", mean}, {"std", std}, {"min", min},
          {"max", max},     {"p50", p50},   {"p90", p90}, {"p99", p99}};
}

}  // namespace kite::bench
