// DeepSeek-V2 (V2, V2-Lite, Coder-V2) and DeepSeek-V3 (V3, R1): MLA attention over a latent
// cache, dense MLP in the first first_k_dense_replace layers, MoE with shared experts after.
// V2 and V3 differ only in routing (softmax greedy / group-limited vs sigmoid noaux_tc with a
// correction bias) and norm_topk_prob, all carried by the config.
//
// Weight names (per layer i, prefix model.layers.i.):
//   self_attn.{q_proj | q_a_proj, q_a_layernorm, q_b_proj}, self_attn.kv_a_proj_with_mqa,
//   self_attn.kv_a_layernorm, self_attn.kv_b_proj, self_attn.o_proj;
//   dense: mlp.{gate,up,down}_proj; MoE: mlp.gate.weight, mlp.gate.e_score_correction_bias (V3),
//   mlp.experts.E.{gate,up,down}_proj, mlp.shared_experts.{gate,up,down}_proj.
// V3's multi-token-prediction layer (model.layers.<num_hidden_layers>) is not loaded.
#include "model/archs/decoder_stack.h"

namespace kite {

Result<std::unique_ptr<Model>> build_deepseek(const ModelConfig& c, const WeightStore& w) {
  KvCacheSpec kv{c.num_hidden_layers, 1, MlaAttention::latent_width(c),
                 MlaAttention::latent_width(c), true};
  auto model = std::make_unique<DecoderStack>(c, kv, RopeTable(c, c.qk_rope_head_dim));
  KITE_RETURN_IF_ERROR(model->load_embeddings(w));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    KITE_ASSIGN_OR_RETURN(Tensor ln1, load_vector(w, p + "input_layernorm.weight", c.hidden_size));
    KITE_ASSIGN_OR_RETURN(Tensor ln2,
                          load_vector(w, p + "post_attention_layernorm.weight", c.hidden_size));
    KITE_ASSIGN_OR_RETURN(MlaAttention attn, MlaAttention::load(w, p + "self_attn.", c));
    std::variant<GatedMlp, Moe> ffn;
    if (c.is_moe_layer(i)) {
      KITE_ASSIGN_OR_RETURN(Moe moe, Moe::load(w, p + "mlp.", c));
      ffn = std::move(moe);
    } else {
      KITE_ASSIGN_OR_RETURN(GatedMlp mlp,
                            GatedMlp::load(w, p + "mlp.", c.hidden_size, c.intermediate_size));
      ffn = std::move(mlp);
    }
    model->layers().push_back(DecoderLayer{ln1, ln2, std::move(attn), std::move(ffn)});
  }
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace kite
