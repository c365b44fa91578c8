#include "model/layers/mla.h"

#include <cmath>
#include <cstring>

#include "model/layers/rope_table.h"

namespace kite {

Result<MlaAttention> MlaAttention::load(Backend& be, const WeightStore& w,
                                        const std::string& prefix, const ModelConfig& c) {
  MlaAttention a;
  a.heads_ = c.num_attention_heads;
  a.nope_ = c.qk_nope_head_dim;
  a.rope_ = c.qk_rope_head_dim;
  a.v_dim_ = c.v_head_dim;
  a.rank_ = c.kv_lora_rank;
  a.eps_ = static_cast<float>(c.rms_norm_eps);
  const double base_scale = 1.0 / std::sqrt(static_cast<double>(a.nope_ + a.rope_));
  a.scale_ = static_cast<float>(base_scale * RopeTable::deepseek_softmax_mscale(c.rope_scaling));
  const int64_t d = c.hidden_size, qk = a.nope_ + a.rope_;
  const bool bias = c.attention_bias;
  if (c.q_lora_rank) {
    const int64_t r = *c.q_lora_rank;
    KITE_ASSIGN_OR_RETURN(a.q_a_proj_, Linear::load(be, w, prefix + "q_a_proj", r, d, bias));
    KITE_ASSIGN_OR_RETURN(a.q_a_norm_, load_vector(be, w, prefix + "q_a_layernorm.weight", r));
    KITE_ASSIGN_OR_RETURN(a.q_b_proj_,
                          Linear::load(be, w, prefix + "q_b_proj", a.heads_ * qk, r));
  } else {
    KITE_ASSIGN_OR_RETURN(a.q_proj_, Linear::load(be, w, prefix + "q_proj", a.heads_ * qk, d));
  }
  KITE_ASSIGN_OR_RETURN(a.kv_a_proj_, Linear::load(be, w, prefix + "kv_a_proj_with_mqa",
                                                   a.rank_ + a.rope_, d, bias));
  KITE_ASSIGN_OR_RETURN(a.kv_a_norm_,
                        load_vector(be, w, prefix + "kv_a_layernorm.weight", a.rank_));
  // Split kv_b_proj [heads * (nope + v), rank] into per-head W_UK^T and W_UV (on the host).
  KITE_ASSIGN_OR_RETURN(Tensor kv_b, w.get_f32(prefix + "kv_b_proj.weight",
                                               {a.heads_ * (a.nope_ + a.v_dim_), a.rank_}));
  const float* kvb = kv_b.data<float>();
  Tensor uk_t = Tensor::empty({a.heads_, a.rank_, a.nope_});  // transposes of W_UK [nope, rank]
  Tensor uv = Tensor::empty({a.heads_, a.v_dim_, a.rank_});
  for (int64_t h = 0; h < a.heads_; ++h) {
    const float* head = kvb + h * (a.nope_ + a.v_dim_) * a.rank_;
    float* dst = uk_t.data<float>() + h * a.rank_ * a.nope_;
    for (int64_t i = 0; i < a.nope_; ++i)
      for (int64_t r = 0; r < a.rank_; ++r) dst[r * a.nope_ + i] = head[i * a.rank_ + r];
    std::memcpy(uv.data<float>() + h * a.v_dim_ * a.rank_, head + a.nope_ * a.rank_,
                a.v_dim_ * a.rank_ * sizeof(float));
  }
  a.w_uk_t_ = be.upload(uk_t);
  a.w_uv_ = be.upload(uv);
  KITE_ASSIGN_OR_RETURN(a.o_proj_, Linear::load(be, w, prefix + "o_proj", d,
                                                a.heads_ * a.v_dim_, bias));
  return a;
}

Tensor MlaAttention::forward(const Tensor& x, const StepContext& ctx, Tensor& latent_cache) const {
  Backend& be = *ctx.be;
  const int64_t t = x.size(0), qk = nope_ + rope_, width = rank_ + rope_;
  Tensor q;
  if (q_proj_) {
    q = (*q_proj_)(be, x);
  } else {
    Tensor qa = (*q_a_proj_)(be, x);
    be.rms_norm(qa, q_a_norm_, eps_, qa);
    q = (*q_b_proj_)(be, qa);
  }
  q = q.view({t, heads_, qk});

  // Latent row = [rms_norm(c_kv) | rope(k_rope)], written straight into the cache; q's rope
  // dims rotate in the same launch, into the absorbed query per head [W_UK^T q_nope | q_rope].
  Tensor latent = kv_a_proj_(be, x);  // [T, rank + rope]
  be.rms_norm_prefix(latent, rank_, kv_a_norm_, eps_);
  Tensor latent3 = latent.view({t, 1, width});
  Tensor q_abs = be.empty({t, heads_, width});
  be.rope_and_cache(&q, nope_, latent3, rank_, nullptr, latent_cache, nullptr, rope_,
                    ops::RopeStyle::kInterleaved, &q_abs, rank_);
  be.head_linear(q, 0, w_uk_t_, q_abs, 0);

  // One kv head; values are the first `rank` dims of the latent rows.
  Tensor o_lat = be.empty({t, heads_, rank_});
  be.attention(q_abs, latent_cache, latent_cache, scale_, o_lat);

  Tensor o = be.empty({t, heads_, v_dim_});
  be.head_linear(o_lat, 0, w_uv_, o, 0);
  return o_proj_(be, o.view({t, heads_ * v_dim_}));
}

}  // namespace kite
