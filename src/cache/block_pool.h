// BlockPool: the bookkeeping half of the paged KV cache.
//
// It hands out block ids of a fixed-size pool and tracks, per block, a reference count and an
// optional prefix hash. It never sees KV bytes: the device-side KV pools are indexed by the
// same block ids (`[num_blocks, block_size, ...]`) and owned by the runtime.
//
// Every block is in exactly one of three places:
//   free       ref_count == 0, no hash, on the free list;
//   evictable  ref_count == 0, has a hash, on the LRU list and in the hash map: its KV is still
//              valid and a request with the same prefix may revive it (incref);
//   in use     ref_count > 0, optionally has a hash (then also in the hash map).
// A hash maps to at most one block and a block has at most one hash. Allocation takes from the
// free list and, only when it is empty, evicts the least recently used evictable block (whose
// hash is forgotten). num_free + num_evictable + num_in_use == num_blocks.
//
// Misuse (decref of an unreferenced block, an id out of range, ...) never corrupts the pool and
// never crashes: the call is ignored and counted, and check_integrity() reports it.
//
// Owned and mutated by the engine thread only (through the Scheduler); not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_hash.h"
#include "core/status.h"

namespace kite::cache {

struct BlockPoolConfig {
  int32_t num_blocks = 0;   // total KV blocks, fixed for the pool's lifetime
  int32_t block_size = 16;  // tokens per block
};

class BlockPool {
 public:
  static Result<BlockPool> create(const BlockPoolConfig& config);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_evictable_blocks() const { return num_evictable_; }
  // Blocks allocate() can hand out right now: free ones plus evictable ones.
  int32_t num_allocatable_blocks() const { return num_free_blocks() + num_evictable_; }
  int32_t num_in_use_blocks() const { return num_blocks() - num_allocatable_blocks(); }
  // Fraction of blocks referenced by some request (the "KV cache usage" metric).
  double usage() const;
  int32_t num_cached_blocks() const { return static_cast<int32_t>(hash_to_block_.size()); }

  // Appends `count` fresh blocks (ref_count 1, no hash) to `out`. All or nothing: returns false
  // and changes nothing when fewer than `count` blocks are allocatable.
  [[nodiscard]] bool allocate(int32_t count, std::vector<int32_t>& out);

  // Adds a reference (prefix sharing). Reviving an evictable block takes it off the LRU list.
  void incref(int32_t block_id);
  // Drops a reference. At zero the block becomes evictable if it has a hash (most recently
  // used end of the LRU list), otherwise free.
  void decref(int32_t block_id);
  // Drops one reference to each block, last block first: a sequence's tail is the least
  // likely part to be shared, so it should be evicted before its prefix.
  void free_blocks(std::span<const int32_t> block_ids);

  // The block holding the prefix whose chain ends in `hash`, if still cached.
  std::optional<int32_t> lookup(const BlockHash& hash) const;
  // Registers `hash` for an in-use block whose KV is now complete. Returns false (and changes
  // nothing) if the hash already belongs to another block — two requests computed the same
  // prefix concurrently; the duplicate stays uncached and is freed normally — or if the block
  // already carries a different hash.
  bool cache_block(int32_t block_id, const BlockHash& hash);
  // Evicts the least recently used evictable block onto the free list. Returns its id, or
  // nothing if no block is evictable. allocate() does this itself when the free list is empty.
  std::optional<int32_t> evict_lru();

  int32_t ref_count(int32_t block_id) const;
  bool is_cached(int32_t block_id) const;
  // Evictable block ids, least recently used first (for tests and debugging).
  std::vector<int32_t> evictable_lru_order() const;

  // Verifies every invariant listed at the top of this file; the message names the first
  // violation found. O(num_blocks); called by tests and when the engine is idle.
  Status check_integrity() const;

 private:
  enum class Place : uint8_t { kFree, kEvictable, kInUse };
  static constexpr int32_t kNoBlock = -1;  // LRU link terminator (internal only)

  struct Block {
    int32_t ref_count = 0;
    Place place = Place::kFree;
    bool has_hash = false;
    BlockHash hash;
    int32_t lru_prev = kNoBlock;
    int32_t lru_next = kNoBlock;
  };

  bool valid_id(int32_t block_id) const { return block_id >= 0 && block_id < num_blocks(); }
  void lru_push_back(int32_t block_id);
  void lru_remove(int32_t block_id);
  Status check_lists(std::vector<uint8_t>& seen) const;
  Status check_hash_map() const;

  int32_t block_size_ = 16;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_list_;  // a stack; back() is allocated next
  int32_t lru_head_ = kNoBlock;     // least recently used evictable block
  int32_t lru_tail_ = kNoBlock;     // most recently used evictable block
  int32_t num_evictable_ = 0;
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> hash_to_block_;
  void record_misuse(const char* what, int32_t block_id);

  int64_t num_misuses_ = 0;   // ignored invalid calls; check_integrity() fails while non-zero
  std::string first_misuse_;  // description of the first one, for the integrity message
};

}  // namespace kite::cache
