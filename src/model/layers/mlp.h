// Gated MLP: down(silu(gate(x)) * up(x)), with gate and up stacked into one weight so a single
// GEMM computes both. Used for dense layers, DeepSeek's shared experts and each routed expert.
#pragma once

#include "model/config.h"
#include "model/layers/linear.h"

namespace kite {

class GatedMlp {
 public:
  // Loads `<prefix>gate_proj`, `<prefix>up_proj` [inter, hidden] and `<prefix>down_proj`.
  static Result<GatedMlp> load(Backend& be, const WeightStore& weights, const std::string& prefix,
                               int64_t hidden, int64_t intermediate);
  // [T, hidden] -> [T, hidden]; `codes`: x's activation codes made for input_linear() by the
  // norm that wrote x, or null; `fold`: the norm x is the input of, folded into input_linear()
  // (Linear::apply), or null. Into `out` [T, hidden] where given (else step scratch).
  Tensor forward(Backend& be, const Tensor& x, const Tensor* codes = nullptr,
                 const FoldedNorm* fold = nullptr, Tensor* out = nullptr) const;
  // The linear that reads x (the stacked gate_up).
  const Linear& input_linear() const { return gate_up_; }
  // Its two weights as plain tensors when both are unquantized without bias and no activation
  // recorder runs (what a backend's fused MoE path can read), else false.
  bool plain_weights(Tensor& gate_up, Tensor& down) const;

 private:
  Linear gate_up_;  // [2 * inter, hidden]: gate rows then up rows
  Linear down_;     // [hidden, inter]
};

}  // namespace kite
