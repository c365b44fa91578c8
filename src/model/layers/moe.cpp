#include "model/layers/moe.h"

#include <cstring>

namespace kite {

Result<Moe> Moe::load(const WeightStore& w, const std::string& prefix, const ModelConfig& c) {
  Moe m;
  const int64_t d = c.hidden_size, e = c.n_routed_experts;
  KITE_ASSIGN_OR_RETURN(m.gate_, Linear::load(w, prefix + "gate", e, d));
  m.routing_.scoring =
      c.scoring_func == "sigmoid" ? ops::MoeScoring::kSigmoid : ops::MoeScoring::kSoftmax;
  m.routing_.method = c.topk_method == "noaux_tc" ? ops::MoeTopkMethod::kNoauxTc
                      : c.topk_method == "group_limited_greedy"
                          ? ops::MoeTopkMethod::kGroupLimitedGreedy
                          : ops::MoeTopkMethod::kGreedy;
  m.routing_.top_k = c.num_experts_per_tok;
  m.routing_.n_group = c.n_group;
  m.routing_.topk_group = c.topk_group;
  m.routing_.norm_topk_prob = c.norm_topk_prob;
  m.routing_.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  if (m.routing_.method == ops::MoeTopkMethod::kNoauxTc &&
      w.contains(prefix + "gate.e_score_correction_bias")) {
    KITE_ASSIGN_OR_RETURN(m.correction_bias_,
                          load_vector(w, prefix + "gate.e_score_correction_bias", e));
  }
  for (int64_t i = 0; i < e; ++i) {
    KITE_ASSIGN_OR_RETURN(GatedMlp expert,
                          GatedMlp::load(w, prefix + "experts." + std::to_string(i) + ".", d,
                                         c.moe_intermediate_size));
    m.experts_.push_back(std::move(expert));
  }
  if (c.n_shared_experts > 0) {
    KITE_ASSIGN_OR_RETURN(m.shared_, GatedMlp::load(w, prefix + "shared_experts.", d,
                                                    c.moe_intermediate_size * c.n_shared_experts));
  }
  return m;
}

Tensor Moe::forward(const Tensor& x) const {
  const int64_t t = x.size(0), d = x.size(1), k = routing_.top_k;
  Tensor logits = gate_(x);
  ops::MoeRoutingParams params = routing_;
  params.correction_bias = correction_bias_.defined() ? &correction_bias_ : nullptr;
  std::vector<int32_t> ids;
  std::vector<float> weights;
  ops::moe_route(logits, params, ids, weights);

  // Group token rows by expert (in expert order, as transformers accumulates them).
  std::vector<std::vector<std::pair<int64_t, float>>> routed(experts_.size());
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < k; ++j) routed[ids[i * k + j]].push_back({i, weights[i * k + j]});

  Tensor out = Tensor::zeros({t, d});
  float* o = out.data<float>();
  for (size_t e = 0; e < experts_.size(); ++e) {
    const auto& rows = routed[e];
    if (rows.empty()) continue;
    Tensor xe = Tensor::empty({static_cast<int64_t>(rows.size()), d});
    for (size_t r = 0; r < rows.size(); ++r)
      std::memcpy(xe.data<float>() + r * d, x.data<float>() + rows[r].first * d, d * 4);
    Tensor ye = experts_[e].forward(xe);
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* y = ye.data<float>() + r * d;
      float* dst = o + rows[r].first * d;
      const float wgt = rows[r].second;
      for (int64_t c = 0; c < d; ++c) dst[c] += y[c] * wgt;
    }
  }
  if (shared_) {
    Tensor s = shared_->forward(x);
    const float* sp = s.data<float>();
    for (int64_t i = 0; i < t * d; ++i) o[i] += sp[i];
  }
  return out;
}

}  // namespace kite
