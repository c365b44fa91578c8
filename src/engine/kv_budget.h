// How many KV blocks an engine gets.
//
// CPU: --kv-cache-memory bytes. GPU (vLLM's --gpu-memory-utilization): one profiling forward
// of max_num_batched_tokens tokens measures the activation peak (the backend's scratch arena
// keeps that memory afterwards), then the KV cache gets
//   utilization * total - (memory already in use: weights, arena, CUDA context).
#pragma once

#include <cstdint>

#include "core/status.h"
#include "engine/engine_config.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace kite {

// `spec` is the cache the engine will allocate (its dtype decides the bytes per token).
Result<int64_t> kv_cache_blocks(Model& model, const KvCacheSpec& spec, const EngineConfig& config);

}  // namespace kite
