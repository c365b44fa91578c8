#include "model/layers/mlp.h"

namespace kite {

Result<GatedMlp> GatedMlp::load(const WeightStore& w, const std::string& prefix, int64_t hidden,
                                int64_t inter) {
  GatedMlp m;
  KITE_ASSIGN_OR_RETURN(
      m.gate_up_,
      Linear::load_stacked(w, {prefix + "gate_proj", prefix + "up_proj"}, {inter, inter}, hidden));
  KITE_ASSIGN_OR_RETURN(m.down_, Linear::load(w, prefix + "down_proj", hidden, inter));
  return m;
}

Tensor GatedMlp::forward(const Tensor& x) const {
  Tensor gate_up = gate_up_(x);
  Tensor act = Tensor::empty({x.size(0), down_.in_features()});
  ops::silu_mul(gate_up, act);
  return down_(act);
}

}  // namespace kite
