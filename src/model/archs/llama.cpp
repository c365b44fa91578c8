// Llama family: Llama 2/3 (+ DeepSeek-LLM, R1-Distill-Llama) and Qwen2 (+ R1-Distill-Qwen).
// Qwen2 differs only by the q/k/v bias, which config.attention_bias carries.
//
// Weight names (per layer i, prefix model.layers.i.):
//   input_layernorm.weight, post_attention_layernorm.weight,
//   self_attn.{q,k,v}_proj.{weight,bias?}, self_attn.o_proj.weight,
//   mlp.{gate,up,down}_proj.weight; plus model.embed_tokens, model.norm, lm_head (or tied).
#include "model/archs/decoder_stack.h"

namespace kite {

Result<std::unique_ptr<Model>> build_llama_family(const ModelConfig& c, const WeightStore& w,
                                                  std::shared_ptr<Backend> backend) {
  Backend& be = *backend;
  KvCacheSpec kv{c.num_hidden_layers, c.num_key_value_heads, c.head_dim, c.head_dim, false,
                 DType::kF32, {}, {}};
  return build_decoder_stack(
      c, kv, RopeTable(c, c.head_dim), w, std::move(backend),
      [&](const std::string& p, int64_t, DecoderLayer& layer) -> Status {
        KITE_ASSIGN_OR_RETURN(layer.attention, GqaAttention::load(be, w, p + "self_attn.", c));
        KITE_ASSIGN_OR_RETURN(layer.ffn,
                              GatedMlp::load(be, w, p + "mlp.", c.hidden_size, c.intermediate_size));
        return ok_status();
      });
}

}  // namespace kite
