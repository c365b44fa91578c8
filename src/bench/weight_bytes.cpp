#include "bench/weight_bytes.h"

#include <algorithm>
#include <cmath>

namespace kite::bench {
namespace {

int64_t gqa_params(const ModelConfig& c) {
  const int64_t d = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim;
  int64_t n = d * q + 2 * d * kv + q * d;
  if (c.attention_bias) n += q + 2 * kv;  // o_proj has no bias in these families
  return n;
}

// MLA's attention parameters of one layer, and (unquantized) the part no quantization method
// stores quantized: kv_b_proj and the two norms.
int64_t mla_params(const ModelConfig& c, int64_t* unquantized) {
  const int64_t d = c.hidden_size, h = c.num_attention_heads, qk = c.qk_head_dim();
  const int64_t bias = c.attention_bias ? 1 : 0;
  int64_t n = 0, plain = 0;
  if (c.q_lora_rank) {
    const int64_t r = *c.q_lora_rank;
    n += d * r + bias * r + r + r * h * qk;  // q_a_proj (+bias), q_a_layernorm, q_b_proj
    plain += r;
  } else {
    n += d * h * qk;
  }
  const int64_t rank = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  n += d * (rank + rope) + bias * (rank + rope) + rank;  // kv_a_proj_with_mqa, kv_a_layernorm
  const int64_t kv_b = h * (c.qk_nope_head_dim + c.v_head_dim) * rank;
  n += kv_b;                         // kv_b_proj
  n += h * c.v_head_dim * d + bias * d;  // o_proj
  *unquantized = plain + rank + kv_b;
  return n;
}

}  // namespace

ParamCounts count_params(const ModelConfig& c) {
  ParamCounts p;
  const int64_t d = c.hidden_size;
  p.embedding = c.vocab_size * d;
  p.lm_head = c.vocab_size * d;
  p.norms = d * (2 * c.num_hidden_layers + 1);
  int64_t attn_plain = 0;
  const int64_t attn = c.is_mla() ? mla_params(c, &attn_plain) : gqa_params(c);
  p.attention = attn * c.num_hidden_layers;
  p.attention_unquantized = attn_plain * c.num_hidden_layers;
  p.routed_expert = 3 * d * c.moe_intermediate_size;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.n_routed_experts > 0 && c.is_moe_layer(l)) {
      ++p.num_moe_layers;
      p.moe_router +=
          c.n_routed_experts * d + (c.topk_method == "noaux_tc" ? c.n_routed_experts : 0);
      p.moe_shared += 3 * d * c.moe_intermediate_size * c.n_shared_experts;
    } else {
      p.dense_mlp += 3 * d * c.intermediate_size;
    }
  }
  p.total = p.embedding + (c.tie_word_embeddings ? 0 : p.lm_head) + p.norms + p.attention +
            p.dense_mlp + p.moe_router + p.moe_shared +
            p.routed_expert * c.n_routed_experts * p.num_moe_layers;
  return p;
}

namespace {

double bytes_per_param(QuantMethod method, double plain) {
  switch (method) {
    case QuantMethod::kNone:
      return plain;
    case QuantMethod::kFp8:
    case QuantMethod::kInt8:
      return 1.0;
    case QuantMethod::kInt4:
    case QuantMethod::kAwq:
      return 0.5 + (4.0 + 1.0) / 128.0;
  }
  return plain;
}

}  // namespace

WeightBytes weight_bytes_for(QuantMethod method, QuantMethod lm_head_method,
                             int64_t compute_dtype_bytes) {
  const double plain = static_cast<double>(compute_dtype_bytes);
  return WeightBytes{bytes_per_param(method, plain), bytes_per_param(lm_head_method, plain), plain};
}

std::string weight_dtype_label(const QuantOptions& quant, const std::string& compute_dtype) {
  const QuantMethod head = quant.lm_head_quant();
  const std::string body(quant_method_name(quant.method)), head_name(quant_method_name(head));
  if (quant.method == QuantMethod::kNone)
    return head == QuantMethod::kNone ? compute_dtype : head_name + " lm_head, " + compute_dtype;
  if (head == QuantMethod::kNone) return body + " linears, " + compute_dtype;
  if (head == quant.method) return body + " linears and lm_head, " + compute_dtype;
  return body + " linears, " + head_name + " lm_head, " + compute_dtype;
}

double decode_weight_bytes_per_step(const ModelConfig& c, int32_t batch_size,
                                    const WeightBytes& bytes) {
  const ParamCounts p = count_params(c);
  const double b = std::max(batch_size, 1);
  double experts = 0;  // routed experts read per MoE layer
  if (c.n_routed_experts > 0) {
    const double e = static_cast<double>(c.n_routed_experts),
                 k = static_cast<double>(c.num_experts_per_tok);
    experts = b == 1 ? k : e * (1.0 - std::pow(1.0 - k / e, b));
  }
  const double linear = static_cast<double>(p.attention - p.attention_unquantized + p.dense_mlp +
                                            p.moe_shared) +
                        experts * static_cast<double>(p.routed_expert * p.num_moe_layers);
  const double other = static_cast<double>(p.norms + p.attention_unquantized + p.moe_router) +
                       b * static_cast<double>(c.hidden_size);  // embedding rows
  return linear * bytes.linear + static_cast<double>(p.lm_head) * bytes.lm_head +
         other * bytes.other;
}

}  // namespace kite::bench
