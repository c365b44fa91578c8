#include "model/layers/linear.h"

namespace kite {

Result<Linear> Linear::load(Backend& be, const WeightStore& weights, const std::string& name,
                            int64_t out, int64_t in, bool with_bias) {
  Linear l;
  KITE_ASSIGN_OR_RETURN(l.weight, be.weight(weights, name + ".weight", {out, in}));
  if (with_bias) {
    KITE_ASSIGN_OR_RETURN(l.bias, load_vector(be, weights, name + ".bias", out));
  }
  return l;
}

Result<Linear> Linear::load_stacked(Backend& be, const WeightStore& weights,
                                    const std::vector<std::string>& names,
                                    const std::vector<int64_t>& outs, int64_t in) {
  std::vector<std::string> tensors;
  for (const std::string& n : names) tensors.push_back(n + ".weight");
  Linear l;
  KITE_ASSIGN_OR_RETURN(l.weight, be.stacked_weight(weights, tensors, outs, in));
  return l;
}

Result<Tensor> load_vector(Backend& be, const WeightStore& weights, const std::string& name,
                           int64_t size) {
  KITE_ASSIGN_OR_RETURN(Tensor host, weights.get_f32(name, {size}));
  return be.upload(host);
}

}  // namespace kite
