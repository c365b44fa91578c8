#include "model/archs/decoder_stack.h"

#include <cstring>
#include <stdexcept>

namespace kite {

Status DecoderStack::load_embeddings(const WeightStore& w) {
  const int64_t v = config_.vocab_size, d = config_.hidden_size;
  KITE_ASSIGN_OR_RETURN(embed_, w.get_f32("model.embed_tokens.weight", {v, d}));
  KITE_ASSIGN_OR_RETURN(final_norm_, w.get_f32("model.norm.weight", {d}));
  if (config_.tie_word_embeddings && !w.contains("lm_head.weight")) {
    lm_head_ = embed_;
  } else {
    KITE_ASSIGN_OR_RETURN(lm_head_, w.get_f32("lm_head.weight", {v, d}));
  }
  return ok_status();
}

Tensor DecoderStack::forward(const ForwardBatch& batch, KvCache& cache) {
  const int64_t t = batch.num_tokens(), d = config_.hidden_size;
  if (t == 0) throw std::invalid_argument("forward: empty batch");
  StepContext ctx;
  ctx.batch = &batch;
  rope_.compute(batch.positions, ctx.cos, ctx.sin);
  ctx.attention.query_start = batch.query_start;
  ctx.attention.seq_lens = batch.seq_lens;
  ctx.attention.block_tables = &batch.block_tables;
  ctx.attention.block_size = cache.block_size();

  Tensor residual = Tensor::empty({t, d});
  ops::embedding(embed_, batch.token_ids, residual);
  Tensor h = Tensor::empty({t, d});
  ops::rms_norm(residual, layers_[0].input_norm, static_cast<float>(config_.rms_norm_eps), h);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  for (size_t l = 0; l < layers_.size(); ++l) {
    DecoderLayer& layer = layers_[l];
    ctx.attention.k_scale = cache.k_scale(static_cast<int64_t>(l));  // FP8 caches only
    ctx.attention.v_scale = cache.v_scale(static_cast<int64_t>(l));
    Tensor attn_out = std::visit(
        [&](auto& attn) -> Tensor {
          using T = std::decay_t<decltype(attn)>;
          if constexpr (std::is_same_v<T, MlaAttention>) {
            return attn.forward(h, ctx, cache.k(l));
          } else {
            return attn.forward(h, ctx, cache.k(l), cache.v(l));
          }
        },
        layer.attention);
    ops::add_rms_norm(residual, attn_out, layer.post_attn_norm, eps, h);
    Tensor ffn_out = std::visit([&](auto& ffn) { return ffn.forward(h); }, layer.ffn);
    const Tensor& next_norm = l + 1 < layers_.size() ? layers_[l + 1].input_norm : final_norm_;
    ops::add_rms_norm(residual, ffn_out, next_norm, eps, h);
  }

  // Only the requested rows go through lm_head (usually one per sequence).
  const int64_t n = static_cast<int64_t>(batch.logits_indices.size());
  Tensor rows = Tensor::empty({n, d});
  for (int64_t i = 0; i < n; ++i) {
    int32_t r = batch.logits_indices[i];
    if (r < 0 || r >= t) throw std::invalid_argument("forward: logits index out of range");
    std::memcpy(rows.data<float>() + i * d, h.data<float>() + r * d, d * sizeof(float));
  }
  Tensor logits = Tensor::empty({n, config_.vocab_size});
  ops::linear(rows, lm_head_, nullptr, logits);
  return logits;
}

Result<std::unique_ptr<Model>> build_decoder_stack(const ModelConfig& c, KvCacheSpec kv_spec,
                                                   RopeTable rope, const WeightStore& w,
                                                   const LayerBuilder& build_layer) {
  auto model = std::make_unique<DecoderStack>(c, kv_spec, std::move(rope));
  KITE_RETURN_IF_ERROR(model->load_embeddings(w));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DecoderLayer layer;
    KITE_ASSIGN_OR_RETURN(layer.input_norm,
                          load_vector(w, p + "input_layernorm.weight", c.hidden_size));
    KITE_ASSIGN_OR_RETURN(layer.post_attn_norm,
                          load_vector(w, p + "post_attention_layernorm.weight", c.hidden_size));
    KITE_RETURN_IF_ERROR(build_layer(p, i, layer));
    model->layers().push_back(std::move(layer));
  }
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace kite
