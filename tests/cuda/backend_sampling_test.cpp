// Backend::sample on the CUDA backend (what the engine calls when the logits stay on the GPU)
// against the host Sampler: greedy rows equal its argmax, greedy rows with penalties equal its
// penalised argmax, top_k = 1 rows equal the argmax at any temperature, top_k = 5 draws stay
// in the host's top 5, the same (seed, offset) draws the same token, and rows the host would
// refuse (NaN, +inf, all -inf) come back as -1.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/backend/cuda_backend.h"
#include "sampling/sampler.h"

namespace kite {
namespace {

TEST(CudaBackendSampling, MatchesTheHostSampler) {
  auto be = cuda::make_cuda_backend();
  ASSERT_TRUE(be->samples_on_device());
  const int64_t rows = 8, vocab = 50000;
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> host(rows * vocab);
  for (float& v : host) v = normal(rng);
  const float inf = std::numeric_limits<float>::infinity();
  host[5 * vocab + 17] = std::numeric_limits<float>::quiet_NaN();
  host[6 * vocab + 99] = inf;
  std::fill(host.begin() + 7 * vocab, host.begin() + 8 * vocab, -inf);

  std::vector<int32_t> prompt = {3, 1000, 49999}, output = {7, 7, 1000};
  const int32_t host_best = static_cast<int32_t>(
      std::max_element(host.begin(), host.begin() + vocab) - host.begin());
  output.push_back(host_best);  // the repetition penalty must move the greedy choice
  std::vector<SamplingParams> params(rows);
  params[0].temperature = 0.0f;                                       // greedy
  params[1].temperature = 0.0f, params[1].repetition_penalty = 4.0f;  // greedy, penalised
  params[1].frequency_penalty = 0.5f;
  params[2].temperature = 1.3f, params[2].top_k = 1;                  // argmax again
  params[3].temperature = 1.0f, params[3].top_k = 5;                  // a top-5 draw
  params[4].temperature = 0.8f, params[4].top_p = 0.9f, params[4].min_p = 0.05f;
  for (int64_t r = 5; r < rows; ++r) params[r].temperature = 0.0f;
  std::vector<DeviceSamplingRow> device_rows(rows);
  for (int64_t r = 0; r < rows; ++r)
    device_rows[r] = {&params[r], TokenHistory{prompt, output}, 42u + static_cast<uint64_t>(r), 9};
  // Rows 1-3 carry row 0's logits, so their answers relate to host_best.
  for (int64_t r = 1; r <= 3; ++r)
    std::copy(host.begin(), host.begin() + vocab, host.begin() + r * vocab);
  Tensor logits = be->floats(host).view({rows, vocab});

  auto got = be->sample(logits, device_rows);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), static_cast<size_t>(rows));
  auto host_sample = [&](int64_t r) {
    auto s = Sampler::create(params[r]);
    EXPECT_TRUE(s.ok());
    auto res = s->sample({host.data() + r * vocab, static_cast<size_t>(vocab)},
                         TokenHistory{prompt, output});
    EXPECT_TRUE(res.ok());
    return res->token_id;
  };
  EXPECT_EQ((*got)[0], host_best);
  EXPECT_EQ((*got)[1], host_sample(1));
  EXPECT_NE((*got)[1], host_best) << "the penalty did not act";
  EXPECT_EQ((*got)[2], host_best);
  std::vector<int32_t> order(vocab);
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                    [&](int32_t a, int32_t b) { return host[3 * vocab + a] > host[3 * vocab + b]; });
  EXPECT_NE(std::find(order.begin(), order.begin() + 5, (*got)[3]), order.begin() + 5);
  EXPECT_GE((*got)[4], 0);
  EXPECT_LT((*got)[4], vocab);
  EXPECT_EQ((*got)[5], -1);  // NaN
  EXPECT_EQ((*got)[6], -1);  // +inf
  EXPECT_EQ((*got)[7], -1);  // all -inf

  auto again = be->sample(logits, device_rows);  // same seeds and offsets: same draws
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *got);
}

}  // namespace
}  // namespace kite
