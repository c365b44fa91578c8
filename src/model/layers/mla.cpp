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
  // q_proj has no bias in transformers' DeepSeek models; q_a_proj and kv_a follow attention_bias.
  const std::string q_first_name = prefix + (c.q_lora_rank ? "q_a_proj" : "q_proj");
  const bool q_first_bias = c.q_lora_rank ? bias : false;
  a.q_first_width_ = c.q_lora_rank ? *c.q_lora_rank : a.heads_ * qk;
  const std::string kv_a_name = prefix + "kv_a_proj_with_mqa";
  const bool stacked = be.device() != Device::kCpu && q_first_bias == bias;
  if (stacked) {
    KITE_ASSIGN_OR_RETURN(a.x_proj_, Linear::load_stacked(be, w, {q_first_name, kv_a_name},
                                                          {a.q_first_width_, a.rank_ + a.rope_},
                                                          d, bias));
  } else {
    KITE_ASSIGN_OR_RETURN(a.q_first_,
                          Linear::load(be, w, q_first_name, a.q_first_width_, d, q_first_bias));
  }
  if (c.q_lora_rank) {
    const int64_t r = *c.q_lora_rank;
    KITE_ASSIGN_OR_RETURN(a.q_a_norm_, load_vector(be, w, prefix + "q_a_layernorm.weight", r));
    KITE_ASSIGN_OR_RETURN(a.q_b_proj_,
                          Linear::load(be, w, prefix + "q_b_proj", a.heads_ * qk, r));
  }
  if (!stacked) {
    KITE_ASSIGN_OR_RETURN(a.kv_a_proj_,
                          Linear::load(be, w, kv_a_name, a.rank_ + a.rope_, d, bias));
  }
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
  // q from its first projection (through q LoRA's norm and up-projection where there is one).
  auto finish_q = [&](Tensor first) {
    if (!q_b_proj_) return first;
    be.rms_norm(first, q_a_norm_, eps_, first);
    return (*q_b_proj_)(be, first);
  };
  Tensor q, latent;  // latent: [T, rank + rope]
  if (x_proj_) {
    const int64_t widths[] = {q_first_width_, width};
    std::vector<Tensor> parts = x_proj_->split(be, x, widths);
    q = finish_q(parts[0]);
    latent = parts[1];
  } else {
    q = finish_q((*q_first_)(be, x));
    latent = (*kv_a_proj_)(be, x);
  }
  q = q.view({t, heads_, qk});

  // Latent row = [rms_norm(c_kv) | rope(k_rope)], written straight into the cache; the norm and
  // q's rope dims (into the absorbed query per head [W_UK^T q_nope | q_rope]) in the same call.
  Tensor latent3 = latent.view({t, 1, width});
  Tensor q_abs = be.empty({t, heads_, width});
  // q_abs's first `rank` columns, W_UK^T q_nope, come with the rope step (in its launch on
  // CUDA): it reads only q, which the rope leaves as it is.
  const Backend::PrefixNorm latent_norm{&kv_a_norm_, rank_, eps_};
  const Backend::HeadProduct absorb_q{&q, 0, &w_uk_t_, &q_abs, 0};
  be.rope_and_cache(&q, nope_, latent3, rank_, nullptr, latent_cache, nullptr, rope_,
                    ops::RopeStyle::kInterleaved, &q_abs, rank_, &latent_norm, &absorb_q);

  // One kv head; values are the first `rank` dims of the latent rows.
  Tensor o_lat = be.empty({t, heads_, rank_});
  be.attention(q_abs, latent_cache, latent_cache, scale_, o_lat);

  Tensor o = be.empty({t, heads_, v_dim_});
  be.head_linear(o_lat, 0, w_uv_, o, 0);
  return o_proj_(be, o.view({t, heads_ * v_dim_}));
}

}  // namespace kite
