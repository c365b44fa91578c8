// Multi-head latent attention (DeepSeek-V2/V3), computed in the absorbed form over a cache of
// the compressed latent.
//
// Per token the cache holds [c_kv (kv_lora_rank, after kv_a_layernorm) | k_rope (rope dims,
// after RoPE)]. kv_b_proj's per-head blocks W_UK [nope, rank] and W_UV [v, rank] are split at
// load: each head's query is moved into latent space (q_lat = W_UK^T q_nope), so attention is
// one-kv-head attention with head_dim rank+rope over the latent itself, and the output latent
// is moved back per head by W_UV. Mathematically identical to transformers' expanded form
// (k_nope = W_UK c_kv, v = W_UV c_kv), and it reads rank+rope floats per cached token instead
// of heads × (nope + rope + v).
#pragma once

#include <optional>
#include <vector>

#include "model/config.h"
#include "model/layers/linear.h"
#include "model/layers/step_context.h"

namespace kite {

class MlaAttention {
 public:
  static Result<MlaAttention> load(Backend& be, const WeightStore& weights, const std::string& prefix,
                                   const ModelConfig& config);
  // Cache row width: kv_lora_rank + qk_rope_head_dim.
  static int64_t latent_width(const ModelConfig& c) { return c.kv_lora_rank + c.qk_rope_head_dim; }
  // x [T, hidden] -> [T, hidden]; writes this step's latents into `latent_cache`
  // [num_blocks, block_size, 1, latent_width].
  Tensor forward(const Tensor& x, const StepContext& ctx, Tensor& latent_cache) const;

 private:
  // q's first projection (q_proj, or q LoRA's q_a_proj) and kv_a_proj_with_mqa (hidden ->
  // rank + rope) both read x. Off the CPU, when both or neither have a bias, they are one
  // stacked Linear (x_proj_: one GEMV launch at decode); on the CPU they stay two (so the
  // calibration recorder samples each linear's inputs as it always did).
  std::optional<Linear> x_proj_;
  std::optional<Linear> q_first_;
  std::optional<Linear> kv_a_proj_;
  int64_t q_first_width_ = 0;
  Tensor q_a_norm_;                 // q LoRA only
  std::optional<Linear> q_b_proj_;  // q LoRA up
  Tensor kv_a_norm_;
  Tensor w_uk_t_;  // [heads, rank, nope]: q_lat = q_nope · W_UK, per head (Backend::head_linear)
  Tensor w_uv_;    // [heads, v, rank]
  Linear o_proj_;
  int64_t heads_ = 0, nope_ = 0, rope_ = 0, v_dim_ = 0, rank_ = 0;
  float eps_ = 1e-6f;
  float scale_ = 1.0f;
};

}  // namespace kite
