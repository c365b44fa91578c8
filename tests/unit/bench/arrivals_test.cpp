// Arrival schedules: the mean rate holds for every burstiness, and burstiness sets the
// spread of the gaps (gamma: coefficient of variation 1/sqrt(shape)).
#include "bench/arrivals.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/serve_bench.h"

namespace kite::bench {
namespace {

struct GapStats {
  double mean, cv;
};

GapStats gap_stats(const std::vector<double>& t) {
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  double mean = 0;
  for (double g : gaps) mean += g;
  mean /= gaps.size();
  double var = 0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= gaps.size();
  return {mean, std::sqrt(var) / mean};
}

TEST(BenchArrivals, MeanRateAndBurstiness) {
  for (double rate : {0.5, 8.0, 300.0}) {
    for (double burstiness : {0.25, 1.0, 4.0}) {
      for (uint64_t seed : {1u, 2u}) {
        auto t = arrival_offsets_s(ArrivalConfig{rate, burstiness, seed}, 20001);
        ASSERT_TRUE(t.ok());
        ASSERT_EQ(t->size(), 20001u);
        EXPECT_EQ((*t)[0], 0.0);
        for (size_t i = 1; i < t->size(); ++i) ASSERT_GE((*t)[i], (*t)[i - 1]);
        GapStats s = gap_stats(*t);
        // 20000 gamma gaps: the sample mean is within ~3.5 sigma of 1/rate (sigma = cv/sqrt(n)).
        EXPECT_NEAR(s.mean * rate, 1.0, 3.5 / std::sqrt(burstiness * 20000))
            << "rate " << rate << " burstiness " << burstiness;
        EXPECT_NEAR(s.cv, 1.0 / std::sqrt(burstiness), 0.06 / std::sqrt(burstiness))
            << "rate " << rate << " burstiness " << burstiness;
      }
    }
  }
}

TEST(BenchArrivals, SeedDeterminesSchedule) {
  auto a = arrival_offsets_s(ArrivalConfig{5, 1, 7}, 50);
  auto b = arrival_offsets_s(ArrivalConfig{5, 1, 7}, 50);
  auto c = arrival_offsets_s(ArrivalConfig{5, 1, 8}, 50);
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST(BenchArrivals, InfiniteRateSendsAllAtOnce) {
  auto t = arrival_offsets_s(ArrivalConfig{INFINITY, 0.5, 1}, 10);
  ASSERT_TRUE(t.ok());
  for (double x : *t) EXPECT_EQ(x, 0.0);
}

TEST(BenchArrivals, RejectsBadSettings) {
  EXPECT_FALSE(arrival_offsets_s(ArrivalConfig{0, 1, 0}, 3).ok());
  EXPECT_FALSE(arrival_offsets_s(ArrivalConfig{-1, 1, 0}, 3).ok());
  EXPECT_FALSE(arrival_offsets_s(ArrivalConfig{NAN, 1, 0}, 3).ok());
  EXPECT_FALSE(arrival_offsets_s(ArrivalConfig{1, 0, 0}, 3).ok());
}

TEST(BenchArrivals, RateListParsing) {
  auto r = parse_rate_list("1, 2.5,inf");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], 1.0);
  EXPECT_EQ((*r)[1], 2.5);
  EXPECT_TRUE(std::isinf((*r)[2]));
  EXPECT_FALSE(parse_rate_list("1,,2").ok());
  EXPECT_FALSE(parse_rate_list("0").ok());
  EXPECT_FALSE(parse_rate_list("fast").ok());
  EXPECT_FALSE(parse_rate_list("").ok());
}

}  // namespace
}  // namespace kite::bench
