#include "model/archs/decoder_stack.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "quant/quant_plan.h"

namespace kite {
namespace {

// A quantized lm_head runs on at most this many rows per call: beyond it the quantized linears
// take their large-M routes, whose workspace grows with the output width (INT4 expands the
// whole weight to BF16: 1 GB for Llama-3's 128,256 x 4,096), and logits are needed for one row
// per sequence, so the rows of a big batch simply take a few calls.
constexpr int64_t kQuantizedLmHeadRows = 128;

// The one linear that reads a layer's attention / FFN input, where there is one (not MLA's, nor
// a MoE's router and experts).
const Linear* attention_input(const DecoderLayer& layer) {
  const auto* gqa = std::get_if<GqaAttention>(&layer.attention);
  return gqa ? &gqa->input_linear() : nullptr;
}
const Linear* ffn_input(const DecoderLayer& layer) {
  const auto* mlp = std::get_if<GatedMlp>(&layer.ffn);
  return mlp ? &mlp->input_linear() : nullptr;
}

}  // namespace

Status DecoderStack::load_embeddings(const WeightStore& w) {
  Backend& be = *backend_;
  const int64_t v = config_.vocab_size, d = config_.hidden_size;
  KITE_ASSIGN_OR_RETURN(embed_, be.weight(w, "model.embed_tokens.weight", {v, d}));
  KITE_ASSIGN_OR_RETURN(final_norm_, load_vector(be, w, "model.norm.weight", d));
  const QuantPlan* plan = w.quant_plan();
  const bool quantize = plan && plan->quantize_lm_head();
  if (config_.tie_word_embeddings && !w.contains("lm_head.weight")) {
    if (quantize) {  // a quantized copy beside the embedding, which lookups still read
      KITE_ASSIGN_OR_RETURN(
          lm_head_, Linear::load_alias(be, w, "model.embed_tokens.weight", "lm_head", v, d));
    } else {
      lm_head_.weight = embed_;
    }
  } else if (quantize || (!w.is_dummy() &&
                          (w.contains("lm_head.qweight") || w.contains("lm_head.weight_scale")))) {
    KITE_ASSIGN_OR_RETURN(lm_head_, Linear::load(be, w, "lm_head", v, d));
  } else {
    KITE_ASSIGN_OR_RETURN(lm_head_.weight, be.weight(w, "lm_head.weight", {v, d}));
  }
  return ok_status();
}

Tensor DecoderStack::forward(const ForwardBatch& batch, KvCache& cache) {
  Tensor logits = forward_logits(batch, cache);
  if (logits.numel() == 0) return Tensor::empty({0, config_.vocab_size});
  return backend_->to_host_f32(logits);
}

Tensor DecoderStack::forward_logits(const ForwardBatch& batch, KvCache& cache) {
  const int64_t t = batch.num_tokens(), d = config_.hidden_size;
  if (t == 0) throw std::invalid_argument("forward: empty batch");
  for (int32_t r : batch.logits_indices)
    if (r < 0 || r >= t) throw std::invalid_argument("forward: logits index out of range");
  Backend& be = *backend_;
  Tensor cos, sin;
  rope_.compute(batch.positions, cos, sin);
  be.begin_step(batch, cos, sin, cache.block_size());
  StepContext ctx{&be, &batch};

  // Only the requested rows go through lm_head (usually one per sequence).
  const int64_t n = static_cast<int64_t>(batch.logits_indices.size());
  bool all_rows = n == t;  // decode: every row, in order (no gather; nothing to upload)
  for (int64_t i = 0; all_rows && i < n; ++i) all_rows = batch.logits_indices[i] == i;

  const float eps = static_cast<float>(config_.rms_norm_eps);
  Tensor residual = be.empty({t, d});
  be.embedding(embed_, residual);
  Tensor h = be.empty({t, d});
  be.rms_norm(residual, layers_[0].input_norm, eps, h);
  // Where the quantized linear that reads h next reads activation codes of h (q/k/v, gate_up,
  // the lm_head on all rows in one call; Backend::norm_activation_codes_bytes), the norm that
  // writes h makes them: one buffer, as each norm's codes are read before the next norm runs.
  // Where that linear folds the norm into its own kernel instead (Linear::folds_norm: the CUDA
  // backend's FP8 / INT8 decode GEMV at one row), h is not made: the linear is given the norm's
  // input and `fold`, and writes residual + x to the other of two residual buffers (its blocks
  // all read the one before), which then becomes `residual`. A gated MLP's output folded into
  // the next layer's q/k/v (or the lm_head) must outlive its layer's scratch, so it is written
  // to `ffn_out_kept`.
  const Linear* lm_head_input = all_rows && t <= kQuantizedLmHeadRows ? &lm_head_ : nullptr;
  int64_t codes_bytes = 0;
  bool any_fold = false;
  auto plan_reader = [&](const Linear* reader) {
    if (!reader) return;
    codes_bytes = std::max(codes_bytes, reader->norm_codes_bytes(be, t));
    any_fold = any_fold || reader->folds_norm(be, t);
  };
  plan_reader(lm_head_input);
  for (const DecoderLayer& layer : layers_) {
    plan_reader(attention_input(layer));
    plan_reader(ffn_input(layer));
  }
  Tensor codes = codes_bytes ? be.empty({codes_bytes}, DType::kU8) : Tensor();
  const Tensor* h_codes = nullptr;  // h's codes for the linear that reads it, if made
  Tensor ffn_out_kept = any_fold ? be.empty({t, d}) : Tensor();
  Tensor residual_next = any_fold ? be.empty({t, d}) : Tensor();
  Tensor fold_residual;  // the residual a pending fold reads
  FoldedNorm fold_args{&fold_residual, nullptr, nullptr, eps};
  const FoldedNorm* fold = nullptr;
  Tensor input = h;  // what the linear after the norm reads: h, or with `fold` the norm's input
  auto norm_into_h = [&](const Tensor& x, const Tensor& weight, const Linear* reader,
                         bool may_fold) {
    h_codes = nullptr;
    fold = nullptr;
    input = h;
    if (may_fold && reader && reader->folds_norm(be, t)) {
      fold_residual = residual;
      std::swap(residual, residual_next);
      fold_args.residual_out = &residual;
      fold_args.weight = &weight;
      fold = &fold_args;
      input = x;
    } else if (reader && codes_bytes && reader->norm_codes_bytes(be, t)) {
      be.add_rms_norm_codes(residual, x, weight, eps, h, reader->prepared.get(), codes);
      h_codes = &codes;
    } else {
      be.add_rms_norm(residual, x, weight, eps, h);
    }
  };
  for (size_t l = 0; l < layers_.size(); ++l) {
    // The layer's activations die with it: its output is added into `residual` and normed into
    // `h`, both made above. Without this a prefill step held every layer's at once (Llama-3-8B
    // at 2,048 tokens: an 11.2 GiB activation peak, which the KV cache went without).
    const Backend::ScratchScope layer_scratch(be);
    DecoderLayer& layer = layers_[l];
    be.set_kv_scales(cache.k_scale(static_cast<int64_t>(l)),  // FP8 caches only
                     cache.v_scale(static_cast<int64_t>(l)));
    Tensor attn_out = std::visit(
        [&](auto& attn) -> Tensor {
          using T = std::decay_t<decltype(attn)>;
          if constexpr (std::is_same_v<T, MlaAttention>) {
            return attn.forward(h, ctx, cache.k(l));  // no fold: MLA has no attention_input
          } else {
            return attn.forward(input, ctx, cache.k(l), cache.v(l), h_codes, fold);
          }
        },
        layer.attention);
    norm_into_h(attn_out, layer.post_attn_norm, ffn_input(layer), true);
    bool kept = false;  // whether ffn_out is ffn_out_kept
    Tensor ffn_out = std::visit(
        [&](auto& ffn) {
          if constexpr (std::is_same_v<std::decay_t<decltype(ffn)>, GatedMlp>) {
            kept = any_fold;
            return ffn.forward(be, input, h_codes, fold, kept ? &ffn_out_kept : nullptr);
          } else {
            return ffn.forward(be, h);  // no fold: a MoE has no ffn_input
          }
        },
        layer.ffn);
    const bool last = l + 1 == layers_.size();
    norm_into_h(ffn_out, last ? final_norm_ : layers_[l + 1].input_norm,
                last ? lm_head_input : attention_input(layers_[l + 1]), kept);
  }

  if (n == 0) return be.empty({0, config_.vocab_size}, DType::kF32);
  Tensor rows = input;  // all rows: h, or the final norm's input where the lm_head folds it
  if (!all_rows) {
    rows = be.empty({n, d});
    be.gather_rows(h, be.index(batch.logits_indices), rows);
  }
  Tensor logits = be.empty({n, config_.vocab_size}, DType::kF32);
  // h_codes or fold: all rows, at most kQuantizedLmHeadRows.
  if (!lm_head_.quantized() || h_codes || fold) {
    lm_head_.apply(be, rows, logits, h_codes, fold);
    return logits;
  }
  for (int64_t r0 = 0; r0 < n; r0 += kQuantizedLmHeadRows) {
    const int64_t r1 = std::min(n, r0 + kQuantizedLmHeadRows);
    Tensor x = r0 == 0 && r1 == n ? rows : rows.slice_rows(r0, r1);
    Tensor y = r0 == 0 && r1 == n ? logits : logits.slice_rows(r0, r1);
    lm_head_.apply(be, x, y);
  }
  return logits;
}

Result<std::unique_ptr<Model>> build_decoder_stack(const ModelConfig& c, KvCacheSpec kv_spec,
                                                   RopeTable rope, const WeightStore& w,
                                                   std::shared_ptr<Backend> backend,
                                                   const LayerBuilder& build_layer) {
  Backend& be = *backend;
  auto model = std::make_unique<DecoderStack>(c, kv_spec, std::move(rope), std::move(backend));
  KITE_RETURN_IF_ERROR(model->load_embeddings(w));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DecoderLayer layer;
    KITE_ASSIGN_OR_RETURN(layer.input_norm,
                          load_vector(be, w, p + "input_layernorm.weight", c.hidden_size));
    KITE_ASSIGN_OR_RETURN(layer.post_attn_norm,
                          load_vector(be, w, p + "post_attention_layernorm.weight", c.hidden_size));
    KITE_RETURN_IF_ERROR(build_layer(p, i, layer));
    model->layers().push_back(std::move(layer));
  }
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace kite
