// Mixture of experts (DeepSeek-V2/V3): a router picks top_k routed experts per token
// (softmax or sigmoid scoring; greedy, group-limited or noaux_tc selection; see ops::moe_route),
// each expert is a gated MLP applied to the tokens routed to it, outputs are combined with the
// routing weights, and the shared experts (one GatedMlp of n_shared × moe_intermediate) are
// added for every token. On the CPU each expert is its own GatedMlp (so --quantization applies
// to it) and tokens are grouped per expert on the host; on other backends the experts' weights
// are stacked into two tensors and Backend::moe_experts runs the whole step on the device.
#pragma once

#include <optional>
#include <vector>

#include "model/config.h"
#include "model/layers/mlp.h"

namespace kite {

class Moe {
 public:
  static Result<Moe> load(Backend& be, const WeightStore& weights, const std::string& prefix,
                          const ModelConfig& config);
  Tensor forward(Backend& be, const Tensor& x) const;  // [T, hidden] -> [T, hidden]

 private:
  Linear gate_;             // router [n_experts, hidden]
  Tensor correction_bias_;  // host F32 [n_experts] (noaux_tc) or undefined: routing runs on
                            // the host side of the backend (Backend::moe_route)
  ops::MoeRoutingParams routing_;
  Tensor routed_per_expert(Backend& be, const Tensor& x, const Tensor& logits,
                           const ops::MoeRoutingParams& params) const;

  std::vector<GatedMlp> experts_;  // CPU backend
  Tensor experts_gate_up_;  // other backends: [n_experts, 2 * moe_inter, hidden] (gate, up)
  Tensor experts_down_;     // [n_experts, hidden, moe_inter]
  std::optional<GatedMlp> shared_;
};

}  // namespace kite
