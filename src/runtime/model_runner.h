// ModelRunner: turns "run these tokens of these sequences" into a ForwardBatch (flattened
// ids, positions, slot mapping from block tables, sequence lengths) and runs the model.
// It alone knows how block tables map to KV slots; the scheduler hands it plain data
// (SequenceChunk), and it hands back logits. Not thread-safe: the engine thread owns it.
#pragma once

#include <span>
#include <vector>

#include "model/model.h"

namespace kite {

enum class LogitsMode { kNone, kLast, kAll };

// One sequence's share of a step.
struct SequenceChunk {
  std::span<const int32_t> token_ids;     // the tokens to run now
  int32_t num_computed_tokens = 0;        // tokens of this sequence already in the cache
  std::span<const int32_t> block_table;   // must cover num_computed_tokens + token_ids.size()
  LogitsMode logits = LogitsMode::kLast;  // kNone for a prefill chunk that is not the last
};

class ModelRunner {
 public:
  ModelRunner(Model& model, KvCache& cache) : model_(model), cache_(cache) {}

  // Logits rows in chunk order: one per kLast chunk, token_ids.size() per kAll chunk.
  Tensor execute(std::span<const SequenceChunk> chunks);
  // The same, logits left in backend memory (Model::forward_logits) for Backend::sample.
  Tensor execute_logits(std::span<const SequenceChunk> chunks);
  static ForwardBatch build_batch(std::span<const SequenceChunk> chunks, int64_t block_size);

  Model& model() { return model_; }
  KvCache& cache() { return cache_; }

 private:
  Model& model_;
  KvCache& cache_;
};

}  // namespace kite
