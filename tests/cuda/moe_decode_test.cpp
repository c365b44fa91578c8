// The fused decode MoE (moe_decode.h) against a CPU loop in double: per (token, choice) the
// expert's silu(gate) * up rounded to bf16 (as the kernel stores it), then the weighted sum of
// the experts' down projections plus the shared experts'. Shapes cover one and several column
// chunks in both kernels, no shared experts, tokens that share an expert, and invalid ids.
#include "kernels/cuda/moe/moe_decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/moe_routing.h"

namespace kite::cuda {
namespace {

using namespace testing;

struct Case {
  int64_t tokens, top_k, experts, d, inter, shared_inter;
};

double silu(double g) { return g / (1.0 + std::exp(-g)); }

// act = bf16(silu(x · Wg^T) * (x · Wu^T)) for the features of gate_up rows [2I, d] at `w`.
std::vector<float> act_ref(const float* x, const float* w, int64_t d, int64_t inter) {
  std::vector<float> act(inter);
  for (int64_t f = 0; f < inter; ++f) {
    double g = 0.0, u = 0.0;
    for (int64_t q = 0; q < d; ++q) {
      g += double{x[q]} * w[f * d + q];
      u += double{x[q]} * w[(inter + f) * d + q];
    }
    act[f] = bf16_to_f32(f32_to_bf16(static_cast<float>(silu(g) * u)));
  }
  return act;
}

// Every token's row of `got` against `ref`; tokens in `bad` must be all NaN.
void expect_rows(const Tensor& got, const Tensor& ref, const std::vector<bool>& bad, int64_t d) {
  for (size_t t = 0; t < bad.size(); ++t) {
    const float* row = got.data<float>() + t * d;
    if (bad[t]) {
      EXPECT_TRUE(all_nan(row, d)) << "token " << t;
      continue;
    }
    Tensor got_t = Tensor::empty({d}), ref_t = Tensor::empty({d});
    std::copy(row, row + d, got_t.data<float>());
    std::copy(ref.data<float>() + t * d, ref.data<float>() + (t + 1) * d, ref_t.data<float>());
    KITE_EXPECT_CLOSE(got_t, ref_t, kTolBF16);
  }
}

// Runs the case with `ids` ([T, top_k]) in two launches and, where it fits, in one, and checks
// every token's row; tokens with an invalid id must be all NaN.
void check_case(const Case& c, const std::vector<int32_t>& ids, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message()
               << "T=" << c.tokens << " top_k=" << c.top_k << " E=" << c.experts << " d=" << c.d
               << " I=" << c.inter << " Is=" << c.shared_inter);
  Tensor x = random_host({c.tokens, c.d}, rng);
  round_to(x, DType::kBF16);
  const float wa = 1.0f / std::sqrt(static_cast<float>(c.d));
  Tensor gate_up = random_host({c.experts, 2 * c.inter, c.d}, rng, -wa, wa);
  round_to(gate_up, DType::kBF16);
  const float wb = 1.0f / std::sqrt(static_cast<float>(c.inter));
  Tensor down = random_host({c.experts, c.d, c.inter}, rng, -wb, wb);
  round_to(down, DType::kBF16);
  Tensor weights = random_host({c.tokens, c.top_k}, rng, 0.1f, 1.0f);
  const bool shared = c.shared_inter > 0;
  Tensor sgu, sdown;
  if (shared) {
    sgu = random_host({2 * c.shared_inter, c.d}, rng, -wa, wa);
    round_to(sgu, DType::kBF16);
    const float ws = 1.0f / std::sqrt(static_cast<float>(c.shared_inter));
    sdown = random_host({c.d, c.shared_inter}, rng, -ws, ws);
    round_to(sdown, DType::kBF16);
  }

  Tensor ref = Tensor::empty({c.tokens, c.d});
  std::vector<bool> bad(c.tokens, false);
  for (int64_t t = 0; t < c.tokens; ++t) {
    const float* xt = x.data<float>() + t * c.d;
    std::vector<double> y(c.d, 0.0);
    for (int64_t k = 0; k < c.top_k; ++k) {
      const int32_t e = ids[t * c.top_k + k];
      if (e < 0 || e >= c.experts) {
        bad[t] = true;
        continue;
      }
      const std::vector<float> act =
          act_ref(xt, gate_up.data<float>() + e * 2 * c.inter * c.d, c.d, c.inter);
      const double wt = weights.data<float>()[t * c.top_k + k];
      const float* de = down.data<float>() + e * c.d * c.inter;
      for (int64_t j = 0; j < c.d; ++j) {
        double s = 0.0;
        for (int64_t f = 0; f < c.inter; ++f) s += double{act[f]} * de[j * c.inter + f];
        y[j] += wt * s;
      }
    }
    if (shared) {
      const std::vector<float> act = act_ref(xt, sgu.data<float>(), c.d, c.shared_inter);
      for (int64_t j = 0; j < c.d; ++j) {
        double s = 0.0;
        for (int64_t f = 0; f < c.shared_inter; ++f)
          s += double{act[f]} * sdown.data<float>()[j * c.shared_inter + f];
        y[j] += s;
      }
    }
    for (int64_t j = 0; j < c.d; ++j) ref.data<float>()[t * c.d + j] = static_cast<float>(y[j]);
  }

  Tensor d_ids = to_device(std::span<const int32_t>(ids), {c.tokens, c.top_k}, test_stream());
  const MoeDecodeWeights w{upload(gate_up, DType::kBF16), upload(down, DType::kBF16),
                           shared ? upload(sgu, DType::kBF16) : Tensor(),
                           shared ? upload(sdown, DType::kBF16) : Tensor()};
  const Tensor d_x = upload(x, DType::kBF16), d_weights = upload(weights, DType::kF32);
  const bool one_fits = moe_decode_one_launch_fits(c.tokens, c.top_k, c.inter, c.shared_inter);
  EXPECT_TRUE(one_fits || c.tokens * (c.top_k * c.inter + c.shared_inter) * 2 > 96 * 1024)
      << "a small act must take the one launch";
  for (MoeDecodeLaunches how :
       {MoeDecodeLaunches::kTwo, MoeDecodeLaunches::kOne, MoeDecodeLaunches::kAuto}) {
    if (how == MoeDecodeLaunches::kOne && !one_fits) continue;
    SCOPED_TRACE(how == MoeDecodeLaunches::kOne   ? "one launch"
                 : how == MoeDecodeLaunches::kTwo ? "two launches"
                                                  : "auto");
    Tensor act = device_poisoned({moe_decode_act_elems(c.tokens, c.top_k, c.inter, c.shared_inter)},
                                 DType::kBF16);
    Tensor out = device_poisoned({c.tokens, c.d}, DType::kBF16);
    // Three calls: the one launch's grid barrier must leave its counters ready for the next.
    for (int call = 0; call < 3; ++call)
      moe_decode(d_x, d_ids, d_weights, w, act, out, test_stream(), how);
    expect_rows(download(out), ref, bad, c.d);
  }
}

std::vector<int32_t> distinct_ids(const Case& c, std::mt19937& rng) {
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < c.tokens; ++t) {
    std::vector<int32_t> all(c.experts);
    for (int64_t e = 0; e < c.experts; ++e) all[e] = static_cast<int32_t>(e);
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + c.top_k);
  }
  return ids;
}

TEST(CudaMoeDecode, MatchesCpuOverShapes) {
  auto rng = test_rng();
  const Case cases[] = {
      {1, 6, 8, 2048, 1408, 2816},  // DeepSeek-V2-Lite's expert shapes, fewer experts
      {1, 2, 3, 8, 8, 8},           // the smallest
      {3, 2, 5, 4160, 72, 40},      // gate_up over three column chunks (the last partial)
      {2, 3, 4, 256, 2064, 4112},   // down over two (routed) and three (shared) chunks
      {4, 2, 6, 520, 64, 0},        // no shared experts; d not a multiple of 64
      {4, 8, 9, 64, 2048, 4096},    // act too large for one launch: kAuto takes two
  };
  for (const Case& c : cases) check_case(c, distinct_ids(c, rng), rng);
}

TEST(CudaMoeDecode, TokensSharingAnExpertEachGetTheirOwnRow) {
  auto rng = test_rng();
  const Case c{4, 2, 3, 256, 48, 32};
  check_case(c, {1, 2, 2, 1, 1, 0, 2, 1}, rng);
}

TEST(CudaMoeDecode, InvalidExpertIdPoisonsOnlyItsToken) {
  auto rng = test_rng();
  const Case c{3, 2, 4, 128, 32, 16};
  check_case(c, {0, 1, 4, 2, 3, -1}, rng);
  check_case(c, {2, 3, 1, 0, 7, 0}, rng);
}

// Random BF16 expert and shared-expert weights of the case's shapes, on the device.
MoeDecodeWeights random_weights(const Case& c, std::mt19937& rng) {
  const float wa = 1.0f / std::sqrt(static_cast<float>(c.d));
  return {upload(random_host({c.experts, 2 * c.inter, c.d}, rng, -wa, wa), DType::kBF16),
          upload(random_host({c.experts, c.d, c.inter}, rng, -0.03f, 0.03f), DType::kBF16),
          upload(random_host({2 * c.shared_inter, c.d}, rng, -wa, wa), DType::kBF16),
          upload(random_host({c.d, c.shared_inter}, rng, -0.02f, 0.02f), DType::kBF16)};
}

// Twelve launches of the one-launch kernel captured in a CUDA graph (as decode steps run),
// replayed twice: every replay must equal the two-launch path bit for bit (same sums, same
// order), and the grid barrier's counters must come back to zero after each launch.
TEST(CudaMoeDecode, OneLaunchInAGraphEqualsTwoLaunches) {
  auto rng = test_rng();
  const Case c{2, 6, 8, 2048, 1408, 2816};
  Tensor x = random_host({c.tokens, c.d}, rng);
  const MoeDecodeWeights w = random_weights(c, rng);
  const Tensor d_x = upload(x, DType::kBF16);
  const Tensor ids =
      to_device(std::span<const int32_t>(distinct_ids(c, rng)), {c.tokens, c.top_k}, test_stream());
  const Tensor weights = upload(random_host({c.tokens, c.top_k}, rng, 0.1f, 1.0f), DType::kF32);
  const int64_t act_elems = moe_decode_act_elems(c.tokens, c.top_k, c.inter, c.shared_inter);
  Tensor act = device_poisoned({act_elems}, DType::kBF16);
  Tensor want = device_poisoned({c.tokens, c.d}, DType::kBF16);
  moe_decode(d_x, ids, weights, w, act, want, test_stream(), MoeDecodeLaunches::kTwo);
  const Tensor want_host = download(want);

  Tensor got = device_poisoned({c.tokens, c.d}, DType::kBF16);
  CapturedGraph graph([&] {
    for (int call = 0; call < 12; ++call)
      moe_decode(d_x, ids, weights, w, act, got, test_stream(), MoeDecodeLaunches::kOne);
  });
  for (int replay = 0; replay < 2; ++replay) {
    poison(got, test_stream());
    graph.launch();
    const Tensor got_host = download(got);
    for (int64_t i = 0; i < c.tokens * c.d; ++i)
      ASSERT_EQ(got_host.data<float>()[i], want_host.data<float>()[i])
          << "replay " << replay << " element " << i;
  }
}

// The early start (MoeDecodeStart::kEarly) right behind moe_route(trigger_first), as the model
// runs it: each of eight steps copies the logits (standing in for the router GEMV, which
// everything before has ended for), routes and runs the MoE into fresh act and out, captured
// in a graph and replayed twice. Every output equals the two launches on the same routing bit
// for bit.
TEST(CudaMoeDecode, EarlyStartBehindTheRoutingEqualsTwoLaunches) {
  auto rng = test_rng();
  const Case c{3, 6, 8, 2048, 1408, 2816};
  const MoeDecodeWeights w = random_weights(c, rng);
  const Tensor d_x = upload(random_host({c.tokens, c.d}, rng), DType::kBF16);
  const Tensor logits = upload(random_host({c.tokens, c.experts}, rng, -4.0f, 4.0f), DType::kF32);
  ops::MoeRoutingParams params;
  params.top_k = c.top_k;
  params.norm_topk_prob = true;
  const int64_t act_elems = moe_decode_act_elems(c.tokens, c.top_k, c.inter, c.shared_inter);

  Tensor ids = device_poisoned({c.tokens, c.top_k}, DType::kI32);
  Tensor weights = device_poisoned({c.tokens, c.top_k}, DType::kF32);
  moe_route(logits, params, ids, weights, test_stream());
  Tensor act = device_poisoned({act_elems}, DType::kBF16);
  Tensor want = device_poisoned({c.tokens, c.d}, DType::kBF16);
  moe_decode(d_x, ids, weights, w, act, want, test_stream(), MoeDecodeLaunches::kTwo);
  const Tensor want_host = download(want);

  constexpr int kSteps = 8;
  std::vector<Tensor> step_logits, step_ids, step_weights, acts, outs;
  for (int s = 0; s < kSteps; ++s) {
    step_logits.push_back(device_poisoned({c.tokens, c.experts}, DType::kF32));
    step_ids.push_back(device_poisoned({c.tokens, c.top_k}, DType::kI32));
    step_weights.push_back(device_poisoned({c.tokens, c.top_k}, DType::kF32));
    acts.push_back(device_poisoned({act_elems}, DType::kBF16));
    outs.push_back(device_poisoned({c.tokens, c.d}, DType::kBF16));
  }
  CapturedGraph graph([&] {
    for (int s = 0; s < kSteps; ++s) {
      KITE_CUDA_CHECK(cudaMemcpyAsync(step_logits[s].raw(), logits.raw(), logits.size_bytes(),
                                      cudaMemcpyDeviceToDevice, test_stream()));
      moe_route(step_logits[s], params, step_ids[s], step_weights[s], test_stream(),
                /*trigger_first=*/true);
      moe_decode(d_x, step_ids[s], step_weights[s], w, acts[s], outs[s], test_stream(),
                 MoeDecodeLaunches::kOne, MoeDecodeStart::kEarly);
    }
  });
  for (int replay = 0; replay < 2; ++replay) {
    for (Tensor& out : outs) poison(out, test_stream());
    graph.launch();
    for (int s = 0; s < kSteps; ++s) {
      const Tensor got = download(outs[s]);
      for (int64_t i = 0; i < c.tokens * c.d; ++i)
        ASSERT_EQ(got.data<float>()[i], want_host.data<float>()[i])
            << "replay " << replay << " step " << s << " element " << i;
    }
  }
}

// An act too large for shared memory beside the ring: kOne refuses, kAuto takes two launches.
TEST(CudaMoeDecode, OneLaunchRefusesAnActTooLargeForSharedMemory) {
  const Case c{4, 8, 9, 64, 2048, 4096};  // act: 4 * (8 * 2048 + 4096) * 2 = 160 KB
  ASSERT_FALSE(moe_decode_one_launch_fits(c.tokens, c.top_k, c.inter, c.shared_inter));
  const MoeDecodeWeights w{device_empty({c.experts, 2 * c.inter, c.d}, DType::kBF16),
                           device_empty({c.experts, c.d, c.inter}, DType::kBF16),
                           device_empty({2 * c.shared_inter, c.d}, DType::kBF16),
                           device_empty({c.d, c.shared_inter}, DType::kBF16)};
  Tensor x = device_empty({c.tokens, c.d}, DType::kBF16);
  Tensor ids = device_empty({c.tokens, c.top_k}, DType::kI32);
  Tensor weights = device_empty({c.tokens, c.top_k}, DType::kF32);
  Tensor act = device_empty({moe_decode_act_elems(c.tokens, c.top_k, c.inter, c.shared_inter)},
                            DType::kBF16);
  Tensor out = device_empty({c.tokens, c.d}, DType::kBF16);
  EXPECT_THROW(moe_decode(x, ids, weights, w, act, out, test_stream(), MoeDecodeLaunches::kOne),
               std::invalid_argument);
}

TEST(CudaMoeDecode, RejectsBadShapes) {
  const MoeDecodeWeights w{device_empty({4, 32, 64}, DType::kBF16),
                           device_empty({4, 64, 16}, DType::kBF16), Tensor(), Tensor()};
  Tensor act = device_empty({1024}, DType::kBF16);
  // Five tokens: above kMoeDecodeMaxTokens.
  Tensor x5 = device_empty({5, 64}, DType::kBF16), ids5 = device_empty({5, 2}, DType::kI32);
  EXPECT_THROW(moe_decode_gate_up(x5, ids5, w, act, test_stream()), std::invalid_argument);
  Tensor x = device_empty({1, 64}, DType::kBF16), ids = device_empty({1, 2}, DType::kI32);
  Tensor weights = device_empty({1, 2}, DType::kF32), out = device_empty({1, 64}, DType::kBF16);
  // x of another width than the weights.
  Tensor x_bad = device_empty({1, 72}, DType::kBF16);
  EXPECT_THROW(moe_decode_gate_up(x_bad, ids, w, act, test_stream()), std::invalid_argument);
  // down's I (8) differs from gate_up's (16).
  const MoeDecodeWeights w_bad{w.gate_up, device_empty({4, 64, 8}, DType::kBF16), Tensor(),
                               Tensor()};
  EXPECT_THROW(moe_decode_down(ids, weights, w_bad, act, out, test_stream()),
               std::invalid_argument);
  // A shared gate_up without its down.
  const MoeDecodeWeights w_half{w.gate_up, w.down, device_empty({32, 64}, DType::kBF16), Tensor()};
  EXPECT_THROW(moe_decode_gate_up(x, ids, w_half, act, test_stream()), std::invalid_argument);
  // act needs 1 * 2 * 16 elements; weights of the wrong shape.
  Tensor tiny = device_empty({8}, DType::kBF16);
  EXPECT_THROW(moe_decode_gate_up(x, ids, w, tiny, test_stream()), std::invalid_argument);
  Tensor weights_bad = device_empty({1, 3}, DType::kF32);
  EXPECT_THROW(moe_decode_down(ids, weights_bad, w, act, out, test_stream()),
               std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
