// Benchmark statistics: numpy-compatible percentiles, summaries and goodput under SLOs.
#include "bench/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "bench/serve_metrics.h"

namespace kite::bench {
namespace {

TEST(BenchStats, PercentileMatchesNumpyLinear) {
  // numpy.percentile([7, 1, 3, 9, 4], q) -> 1, 3, 4, 8.2, 8.92, 9
  const std::vector<double> v = {7, 1, 3, 9, 4};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 4);
  EXPECT_NEAR(percentile(v, 90), 8.2, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 8.92, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 9);
  EXPECT_DOUBLE_EQ(percentile({5.5}, 99), 5.5);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(BenchStats, PercentileIsMonotoneAndBoundedOnRandomData) {
  std::mt19937 rng(3);
  std::lognormal_distribution<double> dist(2.0, 0.8);
  std::vector<double> v(257);
  for (auto& x : v) x = dist(rng);
  const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  double prev = *mn;
  for (double q = 0; q <= 100; q += 0.5) {
    const double p = percentile(v, q);
    EXPECT_GE(p, prev);
    EXPECT_LE(p, *mx);
    prev = p;
  }
  // With 257 samples, rank q/100 * 256 is an integer at q = 25: exactly a sample.
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_DOUBLE_EQ(percentile(v, 25), sorted[64]);
}

TEST(BenchStats, SummaryMeanStdAndPercentiles) {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  Summary s = summarize(v);
  EXPECT_EQ(s.count, 8);
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_DOUBLE_EQ(s.std, 2);  // population std
  EXPECT_DOUBLE_EQ(s.min, 2);
  EXPECT_DOUBLE_EQ(s.max, 9);
  EXPECT_DOUBLE_EQ(s.p50, 4.5);
  EXPECT_NEAR(s.p99, 8.86, 1e-12);
  EXPECT_EQ(summarize({}).count, 0);
}

RequestResult make_result(double ttft_s, double e2e_s, int32_t out, bool ok = true) {
  RequestResult r;
  r.success = ok;
  r.error = ok ? "" : "HTTP 500: boom";
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.output_tokens = out;
  r.prompt_tokens = 10;
  for (int i = 1; i < out; ++i) r.itl_s.push_back((e2e_s - ttft_s) / (out - 1));
  return r;
}

TEST(BenchStats, TpotExcludesFirstToken) {
  RequestResult r = make_result(0.5, 1.5, 11);
  EXPECT_DOUBLE_EQ(r.tpot_s(), 0.1);
  EXPECT_DOUBLE_EQ(make_result(0.5, 0.5, 1).tpot_s(), 0.0);
}

TEST(BenchStats, GoodputCountsRequestsMeetingEverySlo) {
  std::vector<RequestResult> rs = {
      make_result(0.10, 1.10, 11),  // ttft 100 ms, tpot 100 ms
      make_result(0.30, 0.80, 11),  // ttft 300 ms, tpot 50 ms
      make_result(0.05, 0.55, 6),   // ttft 50 ms, tpot 100 ms
      make_result(0.01, 0.02, 2),   // ttft 10 ms, tpot 10 ms
      make_result(0.01, 0.02, 2, /*ok=*/false),
  };
  SloConfig slo;
  slo.ttft_ms = 200;
  slo.tpot_ms = 100;
  ServeMetrics m = compute_serve_metrics(rs, 2.0, slo);
  EXPECT_EQ(m.completed, 4);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.good_requests, 3);  // not the 300 ms TTFT one, not the failed one
  ASSERT_TRUE(m.goodput.has_value());
  EXPECT_DOUBLE_EQ(*m.goodput, 1.5);
  EXPECT_DOUBLE_EQ(m.request_throughput, 2.0);
  EXPECT_EQ(m.total_output_tokens, 11 + 11 + 6 + 2);
  EXPECT_DOUBLE_EQ(m.output_throughput, 15.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, (30 + 40) / 2.0);
  EXPECT_EQ(m.itl_ms.count, 10 + 10 + 5 + 1);
  EXPECT_NEAR(m.ttft_ms.mean, (100 + 300 + 50 + 10) / 4.0, 1e-9);
  ASSERT_EQ(m.first_errors.size(), 1u);
  EXPECT_EQ(m.first_errors[0], "HTTP 500: boom");

  slo.tpot_ms = 60;  // now only the 50 ms / 10 ms TPOT requests qualify on TPOT
  EXPECT_EQ(compute_serve_metrics(rs, 2.0, slo).good_requests, 1);
  EXPECT_FALSE(compute_serve_metrics(rs, 2.0, SloConfig{}).goodput.has_value());
}

}  // namespace
}  // namespace kite::bench
