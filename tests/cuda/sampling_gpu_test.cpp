// GPU sampling (sampling_params_gpu.h) against the CPU sampler's steps (sampling/
// logits_processors.h): the surviving token set of every row must equal the CPU pipeline's
// (penalties -> greedy or temperature -> top_k -> top_p -> min_p), on random F32 rows and on
// BF16 rows full of ties; draws must follow softmax of the survivors and repeat per seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/sampling/sampling_params_gpu.h"
#include "sampling/logits_processors.h"

namespace kite::cuda {
namespace {

using namespace testing;

struct Row {
  SamplingParams sp;
  std::vector<int32_t> prompt, output;
};

Tensor f32_device(const std::vector<float>& v) {
  return to_device(Tensor::from_vector(v, {static_cast<int64_t>(v.size())}), DType::kF32,
                   test_stream());
}

struct DeviceParams {
  GpuSamplingParams params;
  GpuTokenHistory history;
};

DeviceParams upload_params(const std::vector<Row>& rows, int64_t first_offset) {
  std::vector<float> temp, top_p, min_p, rep, freq, pres;
  std::vector<int32_t> top_k, prompt, output, prompt_off{0}, output_off{0};
  std::vector<int64_t> seed, offset;
  for (const Row& r : rows) {
    temp.push_back(r.sp.temperature);
    top_p.push_back(r.sp.top_p);
    min_p.push_back(r.sp.min_p);
    rep.push_back(r.sp.repetition_penalty);
    freq.push_back(r.sp.frequency_penalty);
    pres.push_back(r.sp.presence_penalty);
    top_k.push_back(r.sp.top_k);
    prompt.insert(prompt.end(), r.prompt.begin(), r.prompt.end());
    output.insert(output.end(), r.output.begin(), r.output.end());
    prompt_off.push_back(static_cast<int32_t>(prompt.size()));
    output_off.push_back(static_cast<int32_t>(output.size()));
    seed.push_back(1234);
    offset.push_back(first_offset + static_cast<int64_t>(offset.size()));
  }
  if (prompt.empty()) prompt.push_back(0);  // a tensor needs an element; offsets say 0 used
  if (output.empty()) output.push_back(0);
  const auto n = static_cast<int64_t>(rows.size());
  Stream& s = test_stream();
  DeviceParams d;
  d.params = {f32_device(temp),
              to_device(std::span<const int32_t>(top_k), {n}, s),
              f32_device(top_p),
              f32_device(min_p),
              f32_device(rep),
              f32_device(freq),
              f32_device(pres),
              to_device(std::span<const int64_t>(seed), {n}, s),
              to_device(std::span<const int64_t>(offset), {n}, s)};
  d.history = {
      to_device(std::span<const int32_t>(prompt), {static_cast<int64_t>(prompt.size())}, s),
      to_device(std::span<const int32_t>(prompt_off), {n + 1}, s),
      to_device(std::span<const int32_t>(output), {static_cast<int64_t>(output.size())}, s),
      to_device(std::span<const int32_t>(output_off), {n + 1}, s)};
  return d;
}

// The CPU sampler's surviving tokens and their z = (l - max) / T, sorted by id.
std::vector<Candidate> cpu_survivors(std::vector<float> row, const Row& r) {
  PenaltyScratch scratch;
  apply_penalties(row, {r.prompt, r.output}, r.sp, scratch);
  const auto best = std::max_element(row.begin(), row.end());  // first max: lowest id
  const float m = *best;
  std::vector<Candidate> cands;
  if (r.sp.temperature == 0.0f) return {{static_cast<int32_t>(best - row.begin()), 0.0f}};
  const float inv_t = std::min(1.0f / r.sp.temperature, FLT_MAX);
  const bool use_top_k = r.sp.top_k > 0 && static_cast<size_t>(r.sp.top_k) < row.size();
  if (use_top_k) {
    select_top_k(row, r.sp.top_k, cands);
  } else {
    for (size_t i = 0; i < row.size(); ++i) cands.push_back({static_cast<int32_t>(i), row[i]});
  }
  for (Candidate& c : cands) c.logit = (c.logit - m) * inv_t;
  apply_top_p(cands, use_top_k, r.sp.top_p);
  apply_min_p(cands, r.sp.min_p);
  std::sort(cands.begin(), cands.end(),
            [](const Candidate& a, const Candidate& b) { return a.token_id < b.token_id; });
  return cands;
}

Row random_row(int64_t vocab, std::mt19937& rng) {
  auto pick = [&](std::initializer_list<float> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  Row r;
  r.sp.temperature = pick({0.0f, 0.5f, 1.0f, 1.3f});
  r.sp.top_k = static_cast<int32_t>(pick({0, 1, 5, 50, static_cast<float>(vocab + 10)}));
  r.sp.top_p = pick({1.0f, 0.9f, 0.5f, 0.05f});
  r.sp.min_p = pick({0.0f, 0.05f, 0.2f});
  r.sp.repetition_penalty = pick({1.0f, 1.3f});
  r.sp.frequency_penalty = pick({0.0f, 0.5f});
  r.sp.presence_penalty = pick({0.0f, 0.7f});
  std::uniform_int_distribution<int32_t> id(-2, static_cast<int32_t>(vocab) + 1);
  std::uniform_int_distribution<int32_t> few(0, 40);
  for (int i = few(rng); i > 0; --i) r.prompt.push_back(id(rng));
  for (int i = few(rng); i > 0; --i)
    r.output.push_back(i % 3 == 0 && !r.output.empty() ? r.output[0] : id(rng));
  return r;
}

void check_filter(DType dtype, int64_t vocab, int64_t rows_n, float spread) {
  auto rng = test_rng();
  std::vector<Row> rows;
  for (int64_t i = 0; i < rows_n; ++i) rows.push_back(random_row(vocab, rng));
  Tensor logits = random_host({rows_n, vocab}, rng, -spread, spread);
  round_to(logits, dtype);  // BF16: many equal logits, so the tie rules matter
  DeviceParams d = upload_params(rows, 0);
  Tensor filtered = device_poisoned({rows_n, vocab}, DType::kF32);
  SamplingWorkspace ws;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass checks the counters were reset
    sampling_filter(upload(logits, dtype), d.params, &d.history, ws, filtered, test_stream());
    Tensor got = download(filtered);
    for (int64_t r = 0; r < rows_n; ++r) {
      SCOPED_TRACE("row " + std::to_string(r) + " pass " + std::to_string(pass));
      const float* lr = logits.data<float>() + r * vocab;
      const std::vector<Candidate> want =
          cpu_survivors(std::vector<float>(lr, lr + vocab), rows[r]);
      const float* g = got.data<float>() + r * vocab;
      std::vector<int32_t> got_ids;
      for (int64_t i = 0; i < vocab; ++i) {
        ASSERT_FALSE(std::isnan(g[i])) << i;
        if (g[i] != -INFINITY) got_ids.push_back(static_cast<int32_t>(i));
      }
      ASSERT_EQ(got_ids.size(), want.size());
      for (size_t j = 0; j < want.size(); ++j) {
        ASSERT_EQ(got_ids[j], want[j].token_id);
        ASSERT_NEAR(g[want[j].token_id], want[j].logit, 1e-5f * (1.0f + std::fabs(want[j].logit)));
      }
    }
  }
}

TEST(CudaSamplingGpu, FilterMatchesCpuOnRandomF32Rows) {
  check_filter(DType::kF32, 5003, 48, 4.0f);
}

TEST(CudaSamplingGpu, FilterMatchesCpuWithBf16Ties) { check_filter(DType::kBF16, 1000, 48, 2.0f); }

TEST(CudaSamplingGpu, DrawFollowsTheFilteredDistributionAndRepeats) {
  auto rng = test_rng();
  const int64_t vocab = 8, n = 8192;
  Tensor one = random_host({1, vocab}, rng, -1.5f, 1.5f);
  Tensor logits = Tensor::empty({n, vocab});
  for (int64_t r = 0; r < n; ++r)
    std::copy(one.data<float>(), one.data<float>() + vocab, logits.data<float>() + r * vocab);
  Row row;
  row.sp.temperature = 0.8f;
  row.sp.top_k = 6;
  row.sp.top_p = 0.97f;
  const std::vector<Row> rows(n, row);
  DeviceParams d = upload_params(rows, 0);
  Tensor filtered = device_poisoned({n, vocab}, DType::kF32);
  SamplingWorkspace ws;
  sampling_filter(upload(logits, DType::kF32), d.params, nullptr, ws, filtered, test_stream());
  Tensor ids = device_poisoned({n}, DType::kI32);
  sampling_draw(filtered, d.params, ids, test_stream());
  Tensor h = to_host(ids, test_stream());
  std::vector<int64_t> counts(vocab, 0);
  for (int64_t r = 0; r < n; ++r) {
    const int32_t id = h.data<int32_t>()[r];
    ASSERT_TRUE(id >= 0 && id < vocab) << id;
    ++counts[id];
  }
  const std::vector<Candidate> want =
      cpu_survivors(std::vector<float>(one.data<float>(), one.data<float>() + vocab), row);
  std::vector<double> p(vocab, 0.0);
  double total = 0.0;
  for (const Candidate& c : want) total += std::exp(static_cast<double>(c.logit));
  for (const Candidate& c : want) p[c.token_id] = std::exp(static_cast<double>(c.logit)) / total;
  for (int64_t i = 0; i < vocab; ++i) {
    const double f = static_cast<double>(counts[i]) / n;
    EXPECT_NEAR(f, p[i], 5.0 * std::sqrt(p[i] * (1.0 - p[i]) / n) + 1e-3) << "token " << i;
  }
  // Same (seed, offset): same tokens; other offsets: a different sequence.
  Tensor again = device_poisoned({n}, DType::kI32);
  sampling_draw(filtered, d.params, again, test_stream());
  Tensor h2 = to_host(again, test_stream());
  EXPECT_TRUE(std::equal(h.data<int32_t>(), h.data<int32_t>() + n, h2.data<int32_t>()));
  DeviceParams shifted = upload_params(rows, 1000003);
  sampling_draw(filtered, shifted.params, again, test_stream());
  Tensor h3 = to_host(again, test_stream());
  EXPECT_FALSE(std::equal(h.data<int32_t>(), h.data<int32_t>() + n, h3.data<int32_t>()));
}

TEST(CudaSamplingGpu, RejectsBadShapes) {
  std::vector<Row> rows(2);
  DeviceParams d = upload_params(rows, 0);
  SamplingWorkspace ws;
  Tensor logits = device_empty({3, 10}, DType::kF32);  // 3 rows, params for 2
  Tensor filtered = device_empty({3, 10}, DType::kF32);
  EXPECT_THROW(sampling_filter(logits, d.params, nullptr, ws, filtered, test_stream()),
               std::invalid_argument);
  Tensor ids = device_empty({3}, DType::kI32);
  EXPECT_THROW(sampling_draw(filtered, d.params, ids, test_stream()), std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
