// ForwardBatch: the model's input contract for one step (DESIGN.md §2).
//
// Declared here, in model/, because the model reads it; runtime/ (the model runner) fills it
// from a scheduler's decision. A batch is a flattened set of tokens from several sequences:
// sequence s owns token rows [query_start[s], query_start[s+1]) and, after this step, has
// seq_lens[s] tokens in the KV cache (its earlier tokens were cached by previous steps).
#pragma once

#include <cstdint>
#include <vector>

namespace kite {

struct ForwardBatch {
  std::vector<int32_t> token_ids;     // [num_tokens] tokens to run, all sequences back to back
  std::vector<int32_t> positions;     // [num_tokens] position of each token in its sequence
  std::vector<int64_t> slot_mapping;  // [num_tokens] KV slot = block_id * block_size + offset
  std::vector<int32_t> query_start;   // [num_seqs + 1] row offsets of each sequence's tokens
  std::vector<int32_t> seq_lens;      // [num_seqs] cached length after this step
  std::vector<std::vector<int32_t>> block_tables;  // [num_seqs][blocks] KV block ids
  // Rows of the batch whose logits are wanted (usually each sequence's last token; every
  // row when scoring a text). Logits come back in this order.
  std::vector<int32_t> logits_indices;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(seq_lens.size()); }
};

}  // namespace kite
