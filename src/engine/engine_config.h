// EngineConfig: everything needed to start an engine, with vLLM's flag names in comments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/load_options.h"

namespace kite {

struct EngineConfig {
  std::string model_dir;  // --model
  // --load-format: kDummy invents the weights from config.json; a folder without
  // tokenizer.json then gets a byte-level placeholder tokenizer (ids 0-255 are bytes).
  LoadFormat load_format = LoadFormat::kAuto;
  // --device: auto (CUDA when this binary has it and a GPU is visible), cpu or cuda.
  std::string device = "auto";
  // --gpu-memory-utilization: share of the GPU's memory kite may use in all (weights,
  // activation peak, KV cache); the KV cache gets what is left. CPU: kv_cache_memory_bytes.
  double gpu_memory_utilization = 0.9;
  int64_t kv_cache_memory_bytes = 256ll << 20;  // --kv-cache-memory (CPU KV budget)
  int32_t block_size = 16;                      // --block-size
  int32_t max_num_seqs = 64;                    // --max-num-seqs
  int32_t max_num_batched_tokens = 2048;        // --max-num-batched-tokens
  int32_t max_model_len = 0;                    // --max-model-len (0: the model's max positions)
  int32_t max_waiting = 1024;                   // --max-waiting: queue bound (HTTP 429 beyond)
  int32_t long_prefill_token_threshold = 0;
  bool enable_prefix_caching = true;  // --no-enable-prefix-caching turns it off
  // --enforce-eager: no CUDA graphs (decode steps of up to max_num_seqs sequences are
  // otherwise captured once per shape and replayed).
  bool enforce_eager = false;
  // --host-sampling: copy logits to the host and sample there even when the backend samples
  // on the device (requests with logprobs always sample on the host).
  bool host_sampling = false;
  // --quantization, --kv-cache-dtype, --calibration-text, ... (quant/quant_method.h).
  QuantOptions quant;
  // FP8 KV scales per layer, k then v (filled by Engine::create from --calibration-text).
  std::vector<float> kv_cache_k_scales, kv_cache_v_scales;
};

}  // namespace kite
