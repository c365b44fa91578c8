#include "engine/kv_budget.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <numeric>
#include <string>

#include "model/kv_cache.h"

namespace kite {
namespace {

// One sequence of `tokens` tokens in fresh blocks 0..n-1, logits for its last token.
ForwardBatch profiling_batch(int64_t tokens, int64_t block_size) {
  ForwardBatch b;
  const int64_t blocks = (tokens + block_size - 1) / block_size;
  b.token_ids.assign(tokens, 0);
  b.positions.resize(tokens);
  std::iota(b.positions.begin(), b.positions.end(), 0);
  b.slot_mapping.resize(tokens);
  std::iota(b.slot_mapping.begin(), b.slot_mapping.end(), 0);
  b.query_start = {0, static_cast<int32_t>(tokens)};
  b.seq_lens = {static_cast<int32_t>(tokens)};
  b.block_tables.emplace_back(blocks);
  std::iota(b.block_tables[0].begin(), b.block_tables[0].end(), 0);
  b.logits_indices = {static_cast<int32_t>(tokens - 1)};
  return b;
}

}  // namespace

Result<int64_t> kv_cache_blocks(Model& model, const KvCacheSpec& spec,
                                const EngineConfig& config) {
  Backend& be = model.backend();
  if (be.device() == Device::kCpu)
    return KvCache::blocks_for_budget(spec, config.block_size, config.kv_cache_memory_bytes);
  const int64_t tokens = std::max<int64_t>(1, config.max_num_batched_tokens);
  try {
    const int64_t blocks = (tokens + config.block_size - 1) / config.block_size;
    KvCache scratch(spec, blocks, config.block_size, be);
    ForwardBatch batch = profiling_batch(tokens, config.block_size);
    model.forward(batch, scratch);
    be.synchronize();
  } catch (const std::exception& e) {
    // Most often memory: the step sizes every activation for --max-num-batched-tokens tokens.
    return invalid_argument("the profiling step of " + std::to_string(tokens) +
                            " tokens (--max-num-batched-tokens) failed: " + e.what() +
                            "; lower --max-num-batched-tokens");
  }
  const auto [free_bytes, total_bytes] = be.memory_info();
  const int64_t reserve = static_cast<int64_t>((1.0 - config.gpu_memory_utilization) *
                                               static_cast<double>(total_bytes));
  // The profiling step computes one row of logits; a decode step of max_num_seqs rows holds
  // [rows, vocab] F32 logits and, when sampling on the device, as many filtered values.
  const int64_t logits_bytes = int64_t{2} * config.max_num_seqs * model.config().vocab_size * 4;
  const int64_t budget = free_bytes - reserve - logits_bytes;
  const int64_t per_block = spec.bytes_per_token() * config.block_size;
  spdlog::info("GPU memory: {:.1f} GiB total, {:.1f} GiB free after weights and a {}-token "
               "profiling step (activation peak {:.1f} MiB); utilization {:.2f} leaves {:.1f} "
               "GiB for the KV cache",
               total_bytes / 1073741824.0, free_bytes / 1073741824.0, tokens,
               be.scratch_peak_bytes() / 1048576.0, config.gpu_memory_utilization,
               std::max<int64_t>(0, budget) / 1073741824.0);
  if (budget < per_block)
    return invalid_argument(
        "no GPU memory left for the KV cache: raise --gpu-memory-utilization (now " +
        std::to_string(config.gpu_memory_utilization) +
        ") or lower --max-num-batched-tokens");
  return budget / per_block;
}

}  // namespace kite
