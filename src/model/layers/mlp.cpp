#include "model/layers/mlp.h"

#include "quant/activation_recorder.h"

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

Tensor GatedMlp::forward(Backend& be, const Tensor& x, const Tensor* codes, const FoldedNorm* fold,
                         Tensor* out) const {
  const Tensor act = gate_up_.silu_mul(be, x, codes, fold);
  if (!out) return down_(be, act);
  down_.apply(be, act, *out);
  return *out;
}

bool GatedMlp::plain_weights(Tensor& gate_up, Tensor& down) const {
  for (const Linear* l : {&gate_up_, &down_})
    if (l->quantized() || l->bias.defined()) return false;
  if (active_recorder()) return false;  // the recorder sees each linear's input
  gate_up = gate_up_.weight;
  down = down_.weight;
  return true;
}

}  // namespace kite
