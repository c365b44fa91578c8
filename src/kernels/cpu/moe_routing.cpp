// MoE router: scores -> (optionally group-limited) top-k -> weights, as transformers 5 does it.
//
//   kGreedy             choice = scores; weights = chosen scores.
//   kGroupLimitedGreedy (DeepSeek-V2) group score = max over the group's experts; keep the
//                       topk_group best groups; other experts' choice = 0.0; weights = chosen
//                       choice values (so 0.0 if top_k exceeds the experts left).
//   kNoauxTc            (DeepSeek-V3) choice = scores + correction_bias; group score = sum of
//                       the group's two best choices; other experts' choice = -inf (the fixed
//                       transformers/DeepSeek code; older transformers used 0.0, which differs
//                       only when a kept choice is negative); weights = scores (no bias).
// Then, if norm_topk_prob: w /= sum(w) + 1e-20; finally w *= routed_scaling_factor.
// Top-k order: descending choice value; ties go to the lower expert index (torch.topk leaves
// tie order unspecified; a fixed rule keeps kite deterministic).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

namespace kite::ops {
namespace {

constexpr const char* kOp = "moe_route";

// Fills idx with the positions of the k largest values (descending, lower index on ties).
void top_k_indices(const float* values, int64_t n, int64_t k, std::vector<int32_t>& idx) {
  idx.resize(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [values](int32_t a, int32_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  idx.resize(k);
}

void compute_scores(const float* logits, int64_t num_experts, MoeScoring scoring, float* scores) {
  if (scoring == MoeScoring::kSigmoid) {
    for (int64_t e = 0; e < num_experts; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    return;
  }
  cpu::softmax_row(logits, scores, num_experts);
}

// Keeps the topk_group best groups of `choice` and overwrites every other expert with
// `masked`. Group score: max of the group (V2) or sum of its best two (V3, noaux_tc).
void mask_groups(const MoeRoutingParams& p, int64_t num_experts, float masked, float* choice,
                 std::vector<float>& group_scores, std::vector<int32_t>& idx) {
  const int64_t group_size = num_experts / p.n_group;
  group_scores.resize(p.n_group);
  for (int64_t g = 0; g < p.n_group; ++g) {
    const float* c = choice + g * group_size;
    if (p.method == MoeTopkMethod::kGroupLimitedGreedy) {
      group_scores[g] = *std::max_element(c, c + group_size);
    } else {
      // torch: choice.view(n_group, -1).topk(2).values.sum(); a 1-expert group sums one.
      top_k_indices(c, group_size, std::min<int64_t>(2, group_size), idx);
      float sum = 0.0f;
      for (int32_t i : idx) sum += c[i];
      group_scores[g] = sum;
    }
  }
  top_k_indices(group_scores.data(), p.n_group, p.topk_group, idx);
  std::vector<bool> keep(p.n_group, false);
  for (int32_t g : idx) keep[g] = true;
  for (int64_t g = 0; g < p.n_group; ++g) {
    if (!keep[g]) std::fill(choice + g * group_size, choice + (g + 1) * group_size, masked);
  }
}

void check_params(const Tensor& logits, const MoeRoutingParams& p) {
  cpu::check_f32(logits, kOp, "router_logits");
  KITE_OP_CHECK(logits.dim() >= 1 && logits.size(-1) > 0, kOp,
                "router_logits " + cpu::shape_of(logits) + " has no experts");
  const int64_t num_experts = logits.size(-1);
  KITE_OP_CHECK(
      p.top_k >= 1 && p.top_k <= num_experts, kOp,
      "top_k " + std::to_string(p.top_k) + " must be in [1, " + std::to_string(num_experts) + "]");
  if (p.method != MoeTopkMethod::kGreedy) {
    KITE_OP_CHECK(p.n_group >= 1 && num_experts % p.n_group == 0 && p.topk_group >= 1 &&
                      p.topk_group <= p.n_group,
                  kOp,
                  "n_group " + std::to_string(p.n_group) + " must divide " +
                      std::to_string(num_experts) + " experts and topk_group " +
                      std::to_string(p.topk_group) + " must be in [1, n_group]");
  }
  if (p.method == MoeTopkMethod::kNoauxTc && p.correction_bias != nullptr) {
    cpu::check_f32(*p.correction_bias, kOp, "correction_bias");
    KITE_OP_CHECK(p.correction_bias->numel() == num_experts, kOp,
                  "correction_bias " + cpu::shape_of(*p.correction_bias) + " must have " +
                      std::to_string(num_experts) + " values");
  }
}

}  // namespace

void moe_route(const Tensor& router_logits, const MoeRoutingParams& params,
               std::vector<int32_t>& expert_ids, std::vector<float>& expert_weights) {
  check_params(router_logits, params);
  const int64_t num_experts = router_logits.size(-1);
  const int64_t num_tokens = router_logits.numel() / num_experts;
  const int64_t k = params.top_k;
  expert_ids.resize(num_tokens * k);
  expert_weights.resize(num_tokens * k);
  const bool noaux = params.method == MoeTopkMethod::kNoauxTc;
  const float* bias =
      noaux && params.correction_bias ? params.correction_bias->data<float>() : nullptr;
  std::vector<float> scores(num_experts), choice(num_experts), group_scores;
  std::vector<int32_t> idx;
  for (int64_t t = 0; t < num_tokens; ++t) {
    compute_scores(router_logits.data<float>() + t * num_experts, num_experts, params.scoring,
                   scores.data());
    for (int64_t e = 0; e < num_experts; ++e) choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
    if (params.method != MoeTopkMethod::kGreedy) {
      const float masked = noaux ? -std::numeric_limits<float>::infinity() : 0.0f;
      mask_groups(params, num_experts, masked, choice.data(), group_scores, idx);
    }
    top_k_indices(choice.data(), num_experts, k, idx);
    int32_t* ids = expert_ids.data() + t * k;
    float* w = expert_weights.data() + t * k;
    float sum = 0.0f;
    for (int64_t i = 0; i < k; ++i) {
      ids[i] = idx[i];
      w[i] = noaux ? scores[idx[i]] : choice[idx[i]];
      sum += w[i];
    }
    if (params.norm_topk_prob) {
      const float denom = sum + 1e-20f;
      for (int64_t i = 0; i < k; ++i) w[i] /= denom;
    }
    for (int64_t i = 0; i < k; ++i) w[i] *= params.routed_scaling_factor;
  }
}

}  // namespace kite::ops
