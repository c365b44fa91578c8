#include "runtime/model_runner.h"

#include <stdexcept>

namespace kite {

ForwardBatch ModelRunner::build_batch(std::span<const SequenceChunk> chunks, int64_t block_size) {
  ForwardBatch b;
  b.query_start.push_back(0);
  for (const SequenceChunk& c : chunks) {
    const int32_t n = static_cast<int32_t>(c.token_ids.size());
    const int32_t total = c.num_computed_tokens + n;
    if (static_cast<int64_t>(c.block_table.size()) * block_size < total)
      throw std::invalid_argument("build_batch: block table too short for the sequence");
    const int32_t row0 = static_cast<int32_t>(b.token_ids.size());
    for (int32_t i = 0; i < n; ++i) {
      const int32_t pos = c.num_computed_tokens + i;
      b.token_ids.push_back(c.token_ids[i]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(static_cast<int64_t>(c.block_table[pos / block_size]) * block_size +
                               pos % block_size);
    }
    if (c.logits == LogitsMode::kLast && n > 0) b.logits_indices.push_back(row0 + n - 1);
    if (c.logits == LogitsMode::kAll)
      for (int32_t i = 0; i < n; ++i) b.logits_indices.push_back(row0 + i);
    b.query_start.push_back(row0 + n);
    b.seq_lens.push_back(total);
    b.block_tables.emplace_back(c.block_table.begin(), c.block_table.end());
  }
  return b;
}

Tensor ModelRunner::execute(std::span<const SequenceChunk> chunks) {
  ForwardBatch batch = build_batch(chunks, cache_.block_size());
  return model_.forward(batch, cache_);
}

Tensor ModelRunner::execute_logits(std::span<const SequenceChunk> chunks) {
  ForwardBatch batch = build_batch(chunks, cache_.block_size());
  return model_.forward_logits(batch, cache_);
}

}  // namespace kite
