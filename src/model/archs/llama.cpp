// Llama family: Llama 2/3 (+ DeepSeek-LLM, R1-Distill-Llama) and Qwen2 (+ R1-Distill-Qwen).
// Qwen2 differs only by the q/k/v bias, which config.attention_bias carries.
//
// Weight names (per layer i, prefix model.layers.i.):
//   input_layernorm.weight, post_attention_layernorm.weight,
//   self_attn.{q,k,v}_proj.{weight,bias?}, self_attn.o_proj.weight,
//   mlp.{gate,up,down}_proj.weight; plus model.embed_tokens, model.norm, lm_head (or tied).
#include "model/archs/decoder_stack.h"

namespace kite {

Result<std::unique_ptr<Model>> build_llama_family(const ModelConfig& c, const WeightStore& w) {
  KvCacheSpec kv{c.num_hidden_layers, c.num_key_value_heads, c.head_dim, c.head_dim, false};
  auto model = std::make_unique<DecoderStack>(c, kv, RopeTable(c, c.head_dim));
  KITE_RETURN_IF_ERROR(model->load_embeddings(w));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    KITE_ASSIGN_OR_RETURN(Tensor ln1, load_vector(w, p + "input_layernorm.weight", c.hidden_size));
    KITE_ASSIGN_OR_RETURN(Tensor ln2,
                          load_vector(w, p + "post_attention_layernorm.weight", c.hidden_size));
    KITE_ASSIGN_OR_RETURN(GqaAttention attn, GqaAttention::load(w, p + "self_attn.", c));
    KITE_ASSIGN_OR_RETURN(GatedMlp mlp,
                          GatedMlp::load(w, p + "mlp.", c.hidden_size, c.intermediate_size));
    model->layers().push_back(DecoderLayer{ln1, ln2, std::move(attn), std::move(mlp)});
  }
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace kite
