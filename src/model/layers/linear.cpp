#include "model/layers/linear.h"

#include <cstring>

namespace kite {

Result<Linear> Linear::load(const WeightStore& weights, const std::string& name, int64_t out,
                            int64_t in, bool with_bias) {
  Linear l;
  KITE_ASSIGN_OR_RETURN(l.weight, weights.get_f32(name + ".weight", {out, in}));
  if (with_bias) {
    KITE_ASSIGN_OR_RETURN(l.bias, weights.get_f32(name + ".bias", {out}));
  }
  return l;
}

Result<Linear> Linear::load_stacked(const WeightStore& weights,
                                    const std::vector<std::string>& names,
                                    const std::vector<int64_t>& outs, int64_t in) {
  int64_t total = 0;
  for (int64_t o : outs) total += o;
  Linear l;
  l.weight = Tensor::empty({total, in});
  int64_t row = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    KITE_ASSIGN_OR_RETURN(Tensor part, weights.get_f32(names[i] + ".weight", {outs[i], in}));
    std::memcpy(l.weight.data<float>() + row * in, part.data<float>(), part.size_bytes());
    row += outs[i];
  }
  return l;
}

Result<Tensor> load_vector(const WeightStore& weights, const std::string& name, int64_t size) {
  return weights.get_f32(name, {size});
}

}  // namespace kite
