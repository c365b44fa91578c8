#include "model/layers/attention.h"

#include <cmath>

namespace kite {

Result<GqaAttention> GqaAttention::load(const WeightStore& weights, const std::string& prefix,
                                        const ModelConfig& c) {
  GqaAttention a;
  a.num_heads_ = c.num_attention_heads;
  a.num_kv_heads_ = c.num_key_value_heads;
  a.head_dim_ = c.head_dim;
  a.scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  const int64_t d = c.hidden_size, q = a.num_heads_ * a.head_dim_,
                kv = a.num_kv_heads_ * a.head_dim_;
  KITE_ASSIGN_OR_RETURN(a.q_proj_,
                        Linear::load(weights, prefix + "q_proj", q, d, c.attention_bias));
  KITE_ASSIGN_OR_RETURN(a.k_proj_,
                        Linear::load(weights, prefix + "k_proj", kv, d, c.attention_bias));
  KITE_ASSIGN_OR_RETURN(a.v_proj_,
                        Linear::load(weights, prefix + "v_proj", kv, d, c.attention_bias));
  KITE_ASSIGN_OR_RETURN(a.o_proj_, Linear::load(weights, prefix + "o_proj", d, q));
  return a;
}

Tensor GqaAttention::forward(const Tensor& x, const StepContext& ctx, Tensor& k_cache,
                             Tensor& v_cache) const {
  const int64_t t = x.size(0);
  Tensor q = q_proj_(x).view({t, num_heads_, head_dim_});
  Tensor k = k_proj_(x).view({t, num_kv_heads_, head_dim_});
  Tensor v = v_proj_(x).view({t, num_kv_heads_, head_dim_});
  ops::rope(q, 0, head_dim_, ctx.cos, ctx.sin, ops::RopeStyle::kNeox);
  ops::rope(k, 0, head_dim_, ctx.cos, ctx.sin, ops::RopeStyle::kNeox);
  ops::write_cache(k, ctx.batch->slot_mapping, k_cache, ctx.attention.k_scale);
  ops::write_cache(v, ctx.batch->slot_mapping, v_cache, ctx.attention.v_scale);
  Tensor out = Tensor::empty({t, num_heads_, head_dim_});
  ops::PagedAttentionParams params = ctx.attention;
  params.scale = scale_;
  ops::paged_attention(q, k_cache, v_cache, params, out);
  return o_proj_(out.view({t, num_heads_ * head_dim_}));
}

}  // namespace kite
