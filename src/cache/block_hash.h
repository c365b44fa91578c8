// Prefix hashing for automatic prefix caching.
//
// A full KV block is identified by the hash of its parent block's hash and its own token ids,
// so equal hashes mean equal *prefixes* (not just equal blocks): block i of two requests share a
// hash only if tokens [0, (i+1)*block_size) are identical. The chain starts from a root hash
// derived from a per-model salt, so two models (or two quantizations of one model) served from
// one process never share cache entries. 128-bit XXH3 makes an accidental collision (which would
// silently reuse wrong KV) negligible: ~2^-64 for 2^32 live blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kite::cache {

struct BlockHash {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const BlockHash&) const = default;
};

// For unordered containers: the low 64 bits of an XXH3 hash are already uniformly mixed.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.low); }
};

// The parent hash of a sequence's first block. Different salts give unrelated chains.
BlockHash root_block_hash(std::string_view salt);

// Hash of one block: XXH3_128 over (parent hash bytes, token id bytes).
BlockHash hash_block_tokens(const BlockHash& parent, std::span<const int32_t> token_ids);

// Extends `hashes` (the hashes of the first hashes.size() full blocks of `token_ids`) until it
// covers every full block of `token_ids`. Incremental: cost is proportional to new blocks only.
void extend_block_hashes(const BlockHash& root, std::span<const int32_t> token_ids,
                         int32_t block_size, std::vector<BlockHash>& hashes);

}  // namespace kite::cache
