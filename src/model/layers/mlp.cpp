#include "model/layers/mlp.h"

namespace kite {

Result<GatedMlp> GatedMlp::load(Backend& be, const WeightStore& w, const std::string& prefix,
                                int64_t hidden, int64_t inter) {
  GatedMlp m;
  KITE_ASSIGN_OR_RETURN(m.gate_up_,
                        Linear::load_stacked(be, w, {prefix + "gate_proj", prefix + "up_proj"},
                                             {inter, inter}, hidden));
  KITE_ASSIGN_OR_RETURN(m.down_, Linear::load(be, w, prefix + "down_proj", hidden, inter));
  return m;
}

Tensor GatedMlp::forward(Backend& be, const Tensor& x) const {
  return down_(be, gate_up_.silu_mul(be, x));
}

}  // namespace kite
