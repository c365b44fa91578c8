// MoE dispatch (moe_dispatch.h) against CPU loops: the permutation must equal a stable sort of
// the pairs by expert, gather must copy exact rows, both grouped GEMMs and the grouped GEMV
// must match per-expert products, and combine (and the whole chain) must match sum_k w[t,k] * x[t] W[e]^T.
#include "kernels/cuda/moe/moe_dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {
namespace {

using namespace testing;

std::vector<int32_t> download_i32(const Tensor& t) {
  Tensor h = to_host(t, test_stream());
  return std::vector<int32_t>(h.data<int32_t>(), h.data<int32_t>() + h.numel());
}

// Distinct experts per token, skewed towards low ids so some experts get many rows and
// others none.
std::vector<int32_t> random_ids(int64_t tokens, int64_t top_k, int64_t experts, std::mt19937& rng) {
  std::vector<int32_t> ids;
  std::geometric_distribution<int> skew(3.0 / experts);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> row;
    while (static_cast<int64_t>(row.size()) < top_k) {
      const int32_t e = static_cast<int32_t>(skew(rng) % experts);
      if (std::find(row.begin(), row.end(), e) == row.end()) row.push_back(e);
    }
    ids.insert(ids.end(), row.begin(), row.end());
  }
  return ids;
}

struct Case {
  int64_t tokens, top_k, experts, n, k;
};

TEST(CudaMoeDispatch, PermuteGatherGemmCombineMatchCpu) {
  auto rng = test_rng();
  const Case cases[] = {{1, 1, 8, 64, 64},     {5, 2, 8, 136, 200},   {64, 6, 64, 256, 512},
                        {300, 8, 160, 72, 96}, {129, 4, 16, 128, 64}, {1000, 8, 256, 64, 128}};
  BlasLtContext ctx;
  for (const Case& c : cases) {
    SCOPED_TRACE("T " + std::to_string(c.tokens) + " top_k " + std::to_string(c.top_k) + " E " +
                 std::to_string(c.experts));
    const int64_t pairs = c.tokens * c.top_k;
    const std::vector<int32_t> ids = random_ids(c.tokens, c.top_k, c.experts, rng);
    Tensor d_ids = to_device(std::span<const int32_t>(ids), {c.tokens, c.top_k}, test_stream());
    MoePermutation perm;
    moe_permute(d_ids, c.experts, perm, test_stream());

    // Stable sort by expert on the CPU.
    std::vector<int32_t> order(pairs);
    for (int64_t i = 0; i < pairs; ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ids[a] < ids[b]; });
    std::vector<int32_t> offsets(c.experts + 1, 0), tiles(c.experts + 1, 0);
    for (int32_t e : ids) ++offsets[e + 1];
    for (int64_t e = 0; e < c.experts; ++e) {
      tiles[e + 1] = tiles[e] + (offsets[e + 1] + kMoeRowTile - 1) / kMoeRowTile;
      offsets[e + 1] += offsets[e];
    }
    EXPECT_EQ(download_i32(perm.offsets), offsets);
    EXPECT_EQ(download_i32(perm.tile_offsets), tiles);
    EXPECT_EQ(download_i32(perm.sorted_pairs), order);
    const std::vector<int32_t> to_row = download_i32(perm.pair_to_row);
    for (int64_t r = 0; r < pairs; ++r) ASSERT_EQ(to_row[order[r]], r);

    Tensor x = random_host({c.tokens, c.k}, rng);
    round_to(x, DType::kBF16);
    Tensor w = random_host({c.experts, c.n, c.k}, rng, -0.2f, 0.2f);
    round_to(w, DType::kBF16);
    Tensor weights = random_host({c.tokens, c.top_k}, rng, 0.1f, 1.0f);
    Tensor xp = device_poisoned({pairs, c.k}, DType::kBF16);
    moe_gather(upload(x, DType::kBF16), perm, xp, test_stream());
    Tensor xp_host = download(xp);
    for (int64_t r = 0; r < pairs; ++r)
      ASSERT_TRUE(std::equal(xp_host.data<float>() + r * c.k, xp_host.data<float>() + (r + 1) * c.k,
                             x.data<float>() + (order[r] / c.top_k) * c.k));

    // yp reference in double from the rounded inputs.
    Tensor yp_ref = Tensor::empty({pairs, c.n});
    for (int64_t r = 0; r < pairs; ++r) {
      const float* xr = x.data<float>() + (order[r] / c.top_k) * c.k;
      const float* we = w.data<float>() + ids[order[r]] * c.n * c.k;
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0.0;
        for (int64_t q = 0; q < c.k; ++q) s += double{xr[q]} * we[j * c.k + q];
        yp_ref.data<float>()[r * c.n + j] = static_cast<float>(s);
      }
    }
    Tensor d_w = upload(w, DType::kBF16);
    Tensor yp = device_poisoned({pairs, c.n}, DType::kBF16);
    moe_grouped_linear(xp, d_w, perm, yp, test_stream());
    Tensor yp_dev = download(yp);
    KITE_EXPECT_CLOSE(yp_dev, yp_ref, kTolBF16);
    Tensor yp2 = device_poisoned({pairs, c.n}, DType::kBF16);
    moe_grouped_linear_host(ctx, xp, d_w, offsets, yp2, test_stream());
    KITE_EXPECT_CLOSE(download(yp2), yp_ref, kTolBF16);
    // The decode GEMV on every case (it loops over experts' rows 8 at a time, so it is exact
    // for any count, only slower for many rows).
    Tensor yp3 = device_poisoned({pairs, c.n}, DType::kBF16);
    moe_grouped_gemv(xp, d_w, perm, yp3, test_stream());
    KITE_EXPECT_CLOSE(download(yp3), yp_ref, kTolBF16);

    // Combine: from the device yp (exact reference of the combine itself) and end to end.
    Tensor out = device_poisoned({c.tokens, c.n}, DType::kBF16);
    moe_combine(yp, upload(weights, DType::kF32), perm, out, test_stream());
    Tensor ref_exact = Tensor::empty({c.tokens, c.n}), ref_chain = Tensor::empty({c.tokens, c.n});
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t j = 0; j < c.n; ++j) {
        double a = 0.0, b = 0.0;
        for (int64_t q = 0; q < c.top_k; ++q) {
          const int64_t pair = t * c.top_k + q, row = to_row[pair];
          const double wt = weights.data<float>()[pair];
          a += wt * yp_dev.data<float>()[row * c.n + j];
          b += wt * yp_ref.data<float>()[row * c.n + j];
        }
        ref_exact.data<float>()[t * c.n + j] = static_cast<float>(a);
        ref_chain.data<float>()[t * c.n + j] = static_cast<float>(b);
      }
    Tensor out_host = download(out);
    KITE_EXPECT_CLOSE(out_host, ref_exact, 1e-2);  // only the bf16 rounding of out
    KITE_EXPECT_CLOSE(out_host, ref_chain, kTolBF16);
  }
}

TEST(CudaMoeDispatch, InvalidExpertIdPoisonsOnlyItsToken) {
  auto rng = test_rng();
  const int64_t tokens = 40, top_k = 2, experts = 8, n = 16, k = 32;
  std::vector<int32_t> ids = random_ids(tokens, top_k, experts, rng);
  ids[7 * top_k + 1] = static_cast<int32_t>(experts);  // token 7
  ids[20 * top_k] = -3;                                // token 20
  Tensor d_ids = to_device(std::span<const int32_t>(ids), {tokens, top_k}, test_stream());
  MoePermutation perm;
  moe_permute(d_ids, experts, perm, test_stream());
  const std::vector<int32_t> offsets = download_i32(perm.offsets);
  EXPECT_EQ(offsets.back(), tokens * top_k - 2);
  const std::vector<int32_t> to_row = download_i32(perm.pair_to_row);
  EXPECT_EQ(to_row[7 * top_k + 1], -1);
  EXPECT_EQ(to_row[20 * top_k], -1);

  Tensor x = upload(random_host({tokens, k}, rng), DType::kBF16);
  Tensor xp = device_poisoned({tokens * top_k, k}, DType::kBF16);
  moe_gather(x, perm, xp, test_stream());
  Tensor w = upload(random_host({experts, n, k}, rng), DType::kBF16);
  Tensor yp = device_poisoned({tokens * top_k, n}, DType::kBF16);  // invalid rows stay NaN
  moe_grouped_linear(xp, w, perm, yp, test_stream());
  Tensor weights = upload(random_host({tokens, top_k}, rng, 0.1f, 1.0f), DType::kF32);
  Tensor out = device_poisoned({tokens, n}, DType::kBF16);
  moe_combine(yp, weights, perm, out, test_stream());
  Tensor got = download(out);
  for (int64_t t = 0; t < tokens; ++t) {
    const bool bad = t == 7 || t == 20;
    const float* row = got.data<float>() + t * n;
    if (bad) {
      EXPECT_TRUE(all_nan(row, n)) << "token " << t;
    } else {
      for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(std::isfinite(row[j])) << "token " << t;
    }
  }
}

TEST(CudaMoeDispatch, RejectsBadShapes) {
  Tensor ids = device_empty({4, 2}, DType::kI32);
  MoePermutation perm;
  EXPECT_THROW(moe_permute(ids, 0, perm, test_stream()), std::invalid_argument);
  Tensor ids3 = device_empty({4, 2, 1}, DType::kI32);
  EXPECT_THROW(moe_permute(ids3, 8, perm, test_stream()), std::invalid_argument);
  moe_permute(ids, 8, perm, test_stream());  // garbage ids are fine: they are only routed
  Tensor xp = device_empty({8, 24}, DType::kBF16), yp = device_empty({8, 20}, DType::kBF16);
  Tensor w = device_empty({8, 20, 24}, DType::kBF16);  // N = 20 is not a multiple of 8
  EXPECT_THROW(moe_grouped_linear(xp, w, perm, yp, test_stream()), std::invalid_argument);
  KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
}

}  // namespace
}  // namespace kite::cuda
