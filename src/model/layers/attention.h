// Grouped-query attention (Llama, Qwen2): q/k/v projections (Qwen2: with bias), RoPE (neox
// layout), K/V written into the paged cache, paged causal attention, output projection.
#pragma once

#include "model/config.h"
#include "model/layers/linear.h"
#include "model/layers/step_context.h"

namespace kite {

class GqaAttention {
 public:
  static Result<GqaAttention> load(Backend& be, const WeightStore& weights, const std::string& prefix,
                                   const ModelConfig& config);
  // x [T, hidden] -> [T, hidden]; writes this step's K/V into k_cache / v_cache. `codes`: x's
  // activation codes made for input_linear() by the norm that wrote x, or null; `fold`: the norm
  // x is the input of, folded into input_linear() (Linear::apply), or null.
  Tensor forward(const Tensor& x, const StepContext& ctx, Tensor& k_cache, Tensor& v_cache,
                 const Tensor* codes = nullptr, const FoldedNorm* fold = nullptr) const;
  // The linear that reads x (the stacked q/k/v).
  const Linear& input_linear() const { return qkv_proj_; }

 private:
  Linear qkv_proj_, o_proj_;  // qkv: q, k and v stacked by rows
  int64_t num_heads_ = 0, num_kv_heads_ = 0, head_dim_ = 0;
  float scale_ = 1.0f;
};

}  // namespace kite
