#include "model/layers/attention.h"

#include <cmath>

namespace kite {

Result<GqaAttention> GqaAttention::load(Backend& be, const WeightStore& weights,
                                        const std::string& prefix, const ModelConfig& c) {
  GqaAttention a;
  a.num_heads_ = c.num_attention_heads;
  a.num_kv_heads_ = c.num_key_value_heads;
  a.head_dim_ = c.head_dim;
  a.scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  const int64_t d = c.hidden_size, q = a.num_heads_ * a.head_dim_,
                kv = a.num_kv_heads_ * a.head_dim_;
  const bool bias = c.attention_bias;
  // q, k and v share their input: one stacked weight, one GEMM (split back into three).
  KITE_ASSIGN_OR_RETURN(a.qkv_proj_,
                        Linear::load_stacked(be, weights,
                                             {prefix + "q_proj", prefix + "k_proj", prefix + "v_proj"},
                                             {q, kv, kv}, d, bias));
  KITE_ASSIGN_OR_RETURN(a.o_proj_, Linear::load(be, weights, prefix + "o_proj", d, q));
  return a;
}

Tensor GqaAttention::forward(const Tensor& x, const StepContext& ctx, Tensor& k_cache,
                             Tensor& v_cache, const Tensor* codes, const FoldedNorm* fold) const {
  Backend& be = *ctx.be;
  const int64_t t = x.size(0);
  const int64_t widths[] = {num_heads_ * head_dim_, num_kv_heads_ * head_dim_,
                            num_kv_heads_ * head_dim_};
  std::vector<Tensor> qkv = qkv_proj_.split(be, x, widths, codes, fold);
  Tensor q = qkv[0].view({t, num_heads_, head_dim_});
  Tensor k = qkv[1].view({t, num_kv_heads_, head_dim_});
  Tensor v = qkv[2].view({t, num_kv_heads_, head_dim_});
  Tensor out = be.empty({t, num_heads_, head_dim_});
  be.rope_cache_attention(q, k, v, k_cache, v_cache, head_dim_, ops::RopeStyle::kNeox, scale_, out);
  return o_proj_(be, out.view({t, num_heads_ * head_dim_}));
}

}  // namespace kite
