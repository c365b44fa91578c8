#include "model/layers/moe.h"

#include <stdexcept>


namespace kite {

Result<Moe> Moe::load(Backend& be, const WeightStore& w, const std::string& prefix, const ModelConfig& c) {
  Moe m;
  const int64_t d = c.hidden_size, e = c.n_routed_experts;
  KITE_ASSIGN_OR_RETURN(m.gate_, Linear::load(be, w, prefix + "gate", e, d));
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
                          w.get_f32(prefix + "gate.e_score_correction_bias", {e}));
  }
  const int64_t inter = c.moe_intermediate_size;
  if (be.device() == Device::kCpu) {
    for (int64_t i = 0; i < e; ++i) {
      KITE_ASSIGN_OR_RETURN(
          GatedMlp expert,
          GatedMlp::load(be, w, prefix + "experts." + std::to_string(i) + ".", d, inter));
      m.experts_.push_back(std::move(expert));
    }
  } else {
    std::vector<std::string> gate_up_names, down_names;
    for (int64_t i = 0; i < e; ++i) {
      const std::string p = prefix + "experts." + std::to_string(i) + ".";
      gate_up_names.push_back(p + "gate_proj.weight");
      gate_up_names.push_back(p + "up_proj.weight");
      down_names.push_back(p + "down_proj.weight");
    }
    KITE_ASSIGN_OR_RETURN(
        Tensor gate_up,
        be.stacked_weight(w, gate_up_names, std::vector<int64_t>(2 * e, inter), d));
    KITE_ASSIGN_OR_RETURN(Tensor down,
                          be.stacked_weight(w, down_names, std::vector<int64_t>(e, d), inter));
    m.experts_gate_up_ = gate_up.view({e, 2 * inter, d});
    m.experts_down_ = down.view({e, d, inter});
  }
  if (c.n_shared_experts > 0) {
    KITE_ASSIGN_OR_RETURN(m.shared_, GatedMlp::load(be, w, prefix + "shared_experts.", d,
                                                    c.moe_intermediate_size * c.n_shared_experts));
  }
  return m;
}

Tensor Moe::routed_per_expert(Backend& be, const Tensor& x, const Tensor& logits,
                              const ops::MoeRoutingParams& params) const {
  const int64_t t = x.size(0), d = x.size(1), k = params.top_k;
  const int64_t num_experts = static_cast<int64_t>(experts_.size());
  std::vector<int32_t> ids;
  std::vector<float> weights;
  be.moe_route(logits, params, ids, weights);

  // Group (token, weight) pairs by expert, in expert order (as transformers accumulates them):
  // one gather puts every routed row in that order, each expert runs on its contiguous slice,
  // and its output is scatter-added back with the routing weights, in fp32.
  std::vector<int32_t> count(num_experts, 0), offset(num_experts + 1, 0);
  for (int32_t e : ids) {
    if (e < 0 || e >= num_experts) throw std::runtime_error("moe: router chose a bad expert");
    ++count[e];
  }
  for (int64_t e = 0; e < num_experts; ++e) offset[e + 1] = offset[e] + count[e];
  std::vector<int32_t> rows(ids.size());
  std::vector<float> row_weights(ids.size());
  std::vector<int32_t> fill(offset.begin(), offset.end() - 1);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[i * k + j];
      rows[fill[e]] = static_cast<int32_t>(i);
      row_weights[fill[e]++] = weights[i * k + j];
    }
  Tensor rows_t = be.index(rows);
  Tensor weights_t = be.floats(row_weights);
  Tensor routed = be.empty({static_cast<int64_t>(rows.size()), d});
  be.gather_rows(x, rows_t, routed);
  Tensor acc = be.zeros({t, d}, DType::kF32);
  for (int64_t e = 0; e < num_experts; ++e) {
    if (count[e] == 0) continue;
    Tensor ye = experts_[e].forward(be, routed.slice_rows(offset[e], offset[e + 1]));
    be.scatter_add_rows(acc, ye, rows_t.slice_rows(offset[e], offset[e + 1]),
                        weights_t.slice_rows(offset[e], offset[e + 1]));
  }
  Tensor out = be.empty({t, d});
  be.convert(acc, out);
  return out;
}

Tensor Moe::forward(Backend& be, const Tensor& x) const {
  const int64_t t = x.size(0), d = x.size(1);
  // Router logits in fp32 on every backend: expert choice is sensitive to their rounding.
  Tensor logits = be.empty({t, gate_.out_features()}, DType::kF32);
  be.linear(x, gate_.weight, nullptr, logits);
  ops::MoeRoutingParams params = routing_;
  params.correction_bias = correction_bias_.defined() ? &correction_bias_ : nullptr;
  Tensor routed;
  bool shared_in_routed = false;  // the backend summed the shared experts in already
  if (!experts_.empty()) {
    routed = routed_per_expert(be, x, logits, params);
  } else {
    // One call for routed and shared experts where the backend fuses them (CUDA decode); shared
    // experts it cannot read (quantized) are left out of it and run on their own below.
    Tensor shared_gate_up, shared_down;
    const bool fuse_shared = shared_ && shared_->plain_weights(shared_gate_up, shared_down);
    routed = be.moe_experts_with_shared(x, logits, params, experts_gate_up_, experts_down_,
                                        shared_gate_up, shared_down);
    shared_in_routed = routed.defined() && fuse_shared;
    if (!routed.defined()) {
      routed = be.empty({t, d});
      be.moe_experts(x, logits, params, experts_gate_up_, experts_down_, routed);
    }
  }
  if (!shared_ || shared_in_routed) return routed;
  Tensor out = be.empty({t, d});
  be.add(routed, shared_->forward(be, x), out);
  return out;
}

}  // namespace kite
