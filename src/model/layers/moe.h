// Mixture of experts (DeepSeek-V2/V3): a router picks top_k routed experts per token
// (softmax or sigmoid scoring; greedy, group-limited or noaux_tc selection; see ops::moe_route),
// each expert is a gated MLP applied to the tokens routed to it (Backend::moe_experts, over
// the experts' weights stacked into two tensors), outputs are combined with the routing
// weights, and the shared experts (one GatedMlp of n_shared × moe_intermediate) are
// added for every token.
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
  Tensor experts_gate_up_;  // [n_experts, 2 * moe_inter, hidden]: each expert's gate then up
  Tensor experts_down_;     // [n_experts, hidden, moe_inter]
  std::optional<GatedMlp> shared_;
};

}  // namespace kite
