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

Result<std::unique_ptr<Model>> build_deepseek(const ModelConfig& c, const WeightStore& w,
                                              std::shared_ptr<Backend> backend) {
  Backend& be = *backend;
  const int64_t latent = MlaAttention::latent_width(c);
  KvCacheSpec kv{c.num_hidden_layers, 1, latent, latent, true, DType::kF32, {}, {}};
  kv.fp8_bf16_tail = c.qk_rope_head_dim;  // the rope key ends the latent row
  return build_decoder_stack(
      c, kv, RopeTable(c, c.qk_rope_head_dim), w, std::move(backend),
      [&](const std::string& p, int64_t i, DecoderLayer& layer) -> Status {
        KITE_ASSIGN_OR_RETURN(layer.attention, MlaAttention::load(be, w, p + "self_attn.", c));
        if (c.is_moe_layer(i)) {
          KITE_ASSIGN_OR_RETURN(layer.ffn, Moe::load(be, w, p + "mlp.", c));
        } else {
          KITE_ASSIGN_OR_RETURN(layer.ffn,
                                GatedMlp::load(be, w, p + "mlp.", c.hidden_size, c.intermediate_size));
        }
        return ok_status();
      });
}

}  // namespace kite
