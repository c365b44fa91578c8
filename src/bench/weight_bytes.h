// Parameter counts of a model from its config, as kite's loaders build it (archs/*.cpp),
// for the memory-bandwidth figure of `kite bench latency`.
//
// Decode on one token reads every weight it multiplies once: all attention and dense MLP
// weights, the norms, the MoE router, the shared experts and only the top-k routed experts
// the token picks, the full lm_head, and one embedding row. Bytes = params × the bytes a
// parameter takes (WeightBytes): the compute dtype's size (4 on the CPU backend, fp32; 2 on
// CUDA, BF16) unless --quantization stores the linears it covers (QuantPlan::is_quantizable;
// lm_head with --quantize-lm-head or --lm-head-quantization) in 8 or 4 bits. KV-cache reads and
// activations are not counted, so the GB/s figure is a lower bound on the memory traffic.
//
// For a batch of B tokens in one step, a MoE layer reads the union of the experts the B
// tokens picked; decode_weight_bytes_per_step() uses the expectation under uniform routing,
// E·(1 − (1 − k/E)^B), which is exact for B = 1.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "quant/quant_method.h"

namespace kite::bench {

struct ParamCounts {
  int64_t total = 0;          // every parameter the loader keeps (tied lm_head once)
  int64_t embedding = 0;      // vocab × hidden
  int64_t lm_head = 0;        // vocab × hidden (also when tied: decode still reads it)
  int64_t attention = 0;      // all layers, incl. their norms
  // The part of `attention` no quantization method stores quantized: MLA's kv_b_proj (split at
  // load into per-head matrices) and its q_a / kv_a norms. (Biases, a few thousand values, are
  // counted with their linears.)
  int64_t attention_unquantized = 0;
  int64_t dense_mlp = 0;      // dense FFN layers
  int64_t moe_router = 0;     // gates (+ correction biases)
  int64_t moe_shared = 0;     // shared experts, all layers
  int64_t routed_expert = 0;  // ONE routed expert of one layer
  int64_t num_moe_layers = 0;
  int64_t norms = 0;  // layer norms + final norm
};

ParamCounts count_params(const ModelConfig& config);

// Bytes per parameter: of the linears a quantization method covers, of lm_head, of the rest.
struct WeightBytes {
  double linear = 4, lm_head = 4, other = 4;
};
// For --quantization `method` on a backend computing in `compute_dtype_bytes`: FP8 / INT8 one
// byte (their per-row scales add under 0.1 %), INT4 group-128 half a byte plus an f32 scale and
// a u8 zero per 128 (0.539); lm_head in `lm_head_method`'s bytes (QuantOptions::lm_head_quant;
// kNone: the compute dtype).
WeightBytes weight_bytes_for(QuantMethod method, QuantMethod lm_head_method,
                             int64_t compute_dtype_bytes);

// The reports' weight label: the compute dtype, after what the quantization covers, e.g.
// "int4 linears, bf16", "fp8 linears and lm_head, bf16", "int4 linears, int8 lm_head, bf16".
std::string weight_dtype_label(const QuantOptions& quant, const std::string& compute_dtype);

// Weight bytes one decode step of `batch_size` tokens reads (see above).
double decode_weight_bytes_per_step(const ModelConfig& config, int32_t batch_size,
                                    const WeightBytes& bytes);
inline double decode_weight_bytes_per_step(const ModelConfig& config, int32_t batch_size,
                                           int64_t bytes_per_param = 4) {
  const double b = static_cast<double>(bytes_per_param);
  return decode_weight_bytes_per_step(config, batch_size, WeightBytes{b, b, b});
}

}  // namespace kite::bench
