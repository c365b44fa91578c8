#include "model/layers/mla.h"

#include <cmath>
#include <cstring>

#include "model/layers/rope_table.h"

namespace kite {

Result<MlaAttention> MlaAttention::load(const WeightStore& w, const std::string& prefix,
                                        const ModelConfig& c) {
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
  if (c.q_lora_rank) {
    const int64_t r = *c.q_lora_rank;
    KITE_ASSIGN_OR_RETURN(a.q_a_proj_,
                          Linear::load(w, prefix + "q_a_proj", r, d, c.attention_bias));
    KITE_ASSIGN_OR_RETURN(a.q_a_norm_, load_vector(w, prefix + "q_a_layernorm.weight", r));
    KITE_ASSIGN_OR_RETURN(a.q_b_proj_, Linear::load(w, prefix + "q_b_proj", a.heads_ * qk, r));
  } else {
    KITE_ASSIGN_OR_RETURN(a.q_proj_, Linear::load(w, prefix + "q_proj", a.heads_ * qk, d));
  }
  KITE_ASSIGN_OR_RETURN(a.kv_a_proj_, Linear::load(w, prefix + "kv_a_proj_with_mqa",
                                                   a.rank_ + a.rope_, d, c.attention_bias));
  KITE_ASSIGN_OR_RETURN(a.kv_a_norm_, load_vector(w, prefix + "kv_a_layernorm.weight", a.rank_));
  KITE_ASSIGN_OR_RETURN(Tensor kv_b, w.get_f32(prefix + "kv_b_proj.weight",
                                               {a.heads_ * (a.nope_ + a.v_dim_), a.rank_}));
  const float* kvb = kv_b.data<float>();
  for (int64_t h = 0; h < a.heads_; ++h) {
    const float* head = kvb + h * (a.nope_ + a.v_dim_) * a.rank_;
    Tensor uk_t = Tensor::empty({a.rank_, a.nope_});  // transpose of W_UK [nope, rank]
    for (int64_t i = 0; i < a.nope_; ++i)
      for (int64_t r = 0; r < a.rank_; ++r)
        uk_t.data<float>()[r * a.nope_ + i] = head[i * a.rank_ + r];
    Tensor uv = Tensor::empty({a.v_dim_, a.rank_});
    std::memcpy(uv.data<float>(), head + a.nope_ * a.rank_, uv.size_bytes());
    a.w_uk_t_.push_back(uk_t);
    a.w_uv_.push_back(uv);
  }
  KITE_ASSIGN_OR_RETURN(
      a.o_proj_, Linear::load(w, prefix + "o_proj", d, a.heads_ * a.v_dim_, c.attention_bias));
  return a;
}

Tensor MlaAttention::forward(const Tensor& x, const StepContext& ctx, Tensor& latent_cache) const {
  const int64_t t = x.size(0), qk = nope_ + rope_, width = rank_ + rope_;
  Tensor q;
  if (q_proj_) {
    q = (*q_proj_)(x);
  } else {
    Tensor qa = (*q_a_proj_)(x);
    ops::rms_norm(qa, q_a_norm_, eps_, qa);
    q = (*q_b_proj_)(qa);
  }
  q = q.view({t, heads_, qk});
  ops::rope(q, nope_, rope_, ctx.cos, ctx.sin, ops::RopeStyle::kInterleaved);

  // Latent row = [rms_norm(c_kv) | rope(k_rope)], written straight into the cache.
  Tensor latent = kv_a_proj_(x);  // [T, rank + rope]
  Tensor c_kv = Tensor::empty({t, rank_});
  for (int64_t i = 0; i < t; ++i)
    std::memcpy(c_kv.data<float>() + i * rank_, latent.data<float>() + i * width, rank_ * 4);
  ops::rms_norm(c_kv, kv_a_norm_, eps_, c_kv);
  for (int64_t i = 0; i < t; ++i)
    std::memcpy(latent.data<float>() + i * width, c_kv.data<float>() + i * rank_, rank_ * 4);
  Tensor latent3 = latent.view({t, 1, width});
  ops::rope(latent3, rank_, rope_, ctx.cos, ctx.sin, ops::RopeStyle::kInterleaved);
  ops::write_cache(latent3, ctx.batch->slot_mapping, latent_cache, ctx.attention.k_scale);

  // Absorbed query per head: [W_UK^T q_nope | q_rope].
  Tensor q_abs = Tensor::empty({t, heads_, width});
  Tensor q_nope = Tensor::empty({t, nope_});
  Tensor q_lat = Tensor::empty({t, rank_});
  for (int64_t h = 0; h < heads_; ++h) {
    for (int64_t i = 0; i < t; ++i)
      std::memcpy(q_nope.data<float>() + i * nope_, q.data<float>() + (i * heads_ + h) * qk,
                  nope_ * 4);
    ops::linear(q_nope, w_uk_t_[h], nullptr, q_lat);
    for (int64_t i = 0; i < t; ++i) {
      float* dst = q_abs.data<float>() + (i * heads_ + h) * width;
      std::memcpy(dst, q_lat.data<float>() + i * rank_, rank_ * 4);
      std::memcpy(dst + rank_, q.data<float>() + (i * heads_ + h) * qk + nope_, rope_ * 4);
    }
  }

  // One kv head; values are the latent rows themselves (their rope tail is ignored below).
  Tensor o_lat = Tensor::empty({t, heads_, width});
  ops::PagedAttentionParams params = ctx.attention;
  params.scale = scale_;
  params.v_scale = params.k_scale;  // the latent rows are the values too
  ops::paged_attention(q_abs, latent_cache, latent_cache, params, o_lat);

  Tensor o = Tensor::empty({t, heads_ * v_dim_});
  Tensor o_h = Tensor::empty({t, rank_});
  Tensor v_h = Tensor::empty({t, v_dim_});
  for (int64_t h = 0; h < heads_; ++h) {
    for (int64_t i = 0; i < t; ++i)
      std::memcpy(o_h.data<float>() + i * rank_, o_lat.data<float>() + (i * heads_ + h) * width,
                  rank_ * 4);
    ops::linear(o_h, w_uv_[h], nullptr, v_h);
    for (int64_t i = 0; i < t; ++i)
      std::memcpy(o.data<float>() + (i * heads_ + h) * v_dim_, v_h.data<float>() + i * v_dim_,
                  v_dim_ * 4);
  }
  return o_proj_(o);
}

}  // namespace kite
