// Parameter counts of a model from its config, as kite's loaders build it (archs/*.cpp),
// for the memory-bandwidth figure of `kite bench latency`.
//
// Decode on one token reads every weight it multiplies once: all attention and dense MLP
// weights, the norms, the MoE router, the shared experts and only the top-k routed experts
// the token picks, the full lm_head, and one embedding row. Bytes = params × the weight dtype's
// size (4 on the CPU backend, fp32; 2 on CUDA, BF16). KV-cache reads and activations are not counted, so the
// GB/s figure is a lower bound on the memory traffic.
//
// For a batch of B tokens in one step, a MoE layer reads the union of the experts the B
// tokens picked; decode_weight_bytes_per_step() uses the expectation under uniform routing,
// E·(1 − (1 − k/E)^B), which is exact for B = 1.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace kite::bench {

struct ParamCounts {
  int64_t total = 0;          // every parameter the loader keeps (tied lm_head once)
  int64_t embedding = 0;      // vocab × hidden
  int64_t lm_head = 0;        // vocab × hidden (also when tied: decode still reads it)
  int64_t attention = 0;      // all layers, incl. their norms
  int64_t dense_mlp = 0;      // dense FFN layers
  int64_t moe_router = 0;     // gates (+ correction biases)
  int64_t moe_shared = 0;     // shared experts, all layers
  int64_t routed_expert = 0;  // ONE routed expert of one layer
  int64_t num_moe_layers = 0;
  int64_t norms = 0;  // layer norms + final norm
};

ParamCounts count_params(const ModelConfig& config);

// Weight bytes one decode step of `batch_size` tokens reads (see above).
double decode_weight_bytes_per_step(const ModelConfig& config, int32_t batch_size,
                                    int64_t bytes_per_param = 4);

}  // namespace kite::bench
