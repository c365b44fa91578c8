#include "cache/block_pool.h"

#include <string>

namespace kite::cache {

Result<BlockPool> BlockPool::create(const BlockPoolConfig& config) {
  if (config.num_blocks <= 0) {
    return invalid_argument("KV block pool needs at least one block, got num_blocks=" +
                            std::to_string(config.num_blocks));
  }
  if (config.block_size <= 0) {
    return invalid_argument("KV block_size must be positive, got " +
                            std::to_string(config.block_size));
  }
  BlockPool pool;
  pool.block_size_ = config.block_size;
  pool.blocks_.resize(static_cast<size_t>(config.num_blocks));
  pool.free_list_.reserve(static_cast<size_t>(config.num_blocks));
  // Pushed in reverse so blocks are handed out 0, 1, 2, ... (deterministic, easy to read).
  for (int32_t id = config.num_blocks - 1; id >= 0; --id) pool.free_list_.push_back(id);
  return pool;
}

double BlockPool::usage() const {
  return static_cast<double>(num_in_use_blocks()) / static_cast<double>(num_blocks());
}

bool BlockPool::allocate(int32_t count, std::vector<int32_t>& out) {
  if (count < 0 || count > num_allocatable_blocks()) return false;
  for (int32_t i = 0; i < count; ++i) {
    if (free_list_.empty()) evict_lru();  // cannot fail: count <= free + evictable
    const int32_t id = free_list_.back();
    free_list_.pop_back();
    Block& b = blocks_[static_cast<size_t>(id)];
    b.place = Place::kInUse;
    b.ref_count = 1;
    out.push_back(id);
  }
  return true;
}

void BlockPool::incref(int32_t block_id) {
  if (!valid_id(block_id)) return record_misuse("incref of an invalid block id", block_id);
  Block& b = blocks_[static_cast<size_t>(block_id)];
  switch (b.place) {
    case Place::kFree:
      // A free block has no valid KV; sharing it would read garbage.
      return record_misuse("incref of a free block", block_id);
    case Place::kEvictable:
      lru_remove(block_id);
      b.place = Place::kInUse;
      b.ref_count = 1;
      return;
    case Place::kInUse:
      ++b.ref_count;
      return;
  }
}

void BlockPool::decref(int32_t block_id) {
  if (!valid_id(block_id)) return record_misuse("decref of an invalid block id", block_id);
  Block& b = blocks_[static_cast<size_t>(block_id)];
  if (b.place != Place::kInUse) return record_misuse("decref of an unreferenced block", block_id);
  if (--b.ref_count > 0) return;
  if (b.has_hash) {
    b.place = Place::kEvictable;
    lru_push_back(block_id);
  } else {
    b.place = Place::kFree;
    free_list_.push_back(block_id);
  }
}

void BlockPool::free_blocks(std::span<const int32_t> block_ids) {
  for (auto it = block_ids.rbegin(); it != block_ids.rend(); ++it) decref(*it);
}

std::optional<int32_t> BlockPool::lookup(const BlockHash& hash) const {
  auto it = hash_to_block_.find(hash);
  if (it == hash_to_block_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::cache_block(int32_t block_id, const BlockHash& hash) {
  if (!valid_id(block_id)) {
    record_misuse("cache_block of an invalid block id", block_id);
    return false;
  }
  Block& b = blocks_[static_cast<size_t>(block_id)];
  if (b.place != Place::kInUse) {
    // Only a referenced block is being written by someone who knows its contents.
    record_misuse("cache_block of an unreferenced block", block_id);
    return false;
  }
  if (b.has_hash) return b.hash == hash;
  auto [it, inserted] = hash_to_block_.try_emplace(hash, block_id);
  if (!inserted) return false;
  b.has_hash = true;
  b.hash = hash;
  return true;
}

std::optional<int32_t> BlockPool::evict_lru() {
  if (lru_head_ == kNoBlock) return std::nullopt;
  const int32_t id = lru_head_;
  Block& b = blocks_[static_cast<size_t>(id)];
  lru_remove(id);
  hash_to_block_.erase(b.hash);
  b.has_hash = false;
  b.hash = BlockHash{};
  b.place = Place::kFree;
  free_list_.push_back(id);
  return id;
}

int32_t BlockPool::ref_count(int32_t block_id) const {
  return valid_id(block_id) ? blocks_[static_cast<size_t>(block_id)].ref_count : 0;
}

bool BlockPool::is_cached(int32_t block_id) const {
  return valid_id(block_id) && blocks_[static_cast<size_t>(block_id)].has_hash;
}

std::vector<int32_t> BlockPool::evictable_lru_order() const {
  std::vector<int32_t> order;
  order.reserve(static_cast<size_t>(num_evictable_));
  for (int32_t id = lru_head_; id != kNoBlock; id = blocks_[static_cast<size_t>(id)].lru_next) {
    order.push_back(id);
  }
  return order;
}

void BlockPool::lru_push_back(int32_t block_id) {
  Block& b = blocks_[static_cast<size_t>(block_id)];
  b.lru_prev = lru_tail_;
  b.lru_next = kNoBlock;
  if (lru_tail_ != kNoBlock) {
    blocks_[static_cast<size_t>(lru_tail_)].lru_next = block_id;
  } else {
    lru_head_ = block_id;
  }
  lru_tail_ = block_id;
  ++num_evictable_;
}

void BlockPool::lru_remove(int32_t block_id) {
  Block& b = blocks_[static_cast<size_t>(block_id)];
  if (b.lru_prev != kNoBlock) {
    blocks_[static_cast<size_t>(b.lru_prev)].lru_next = b.lru_next;
  } else {
    lru_head_ = b.lru_next;
  }
  if (b.lru_next != kNoBlock) {
    blocks_[static_cast<size_t>(b.lru_next)].lru_prev = b.lru_prev;
  } else {
    lru_tail_ = b.lru_prev;
  }
  b.lru_prev = b.lru_next = kNoBlock;
  --num_evictable_;
}

void BlockPool::record_misuse(const char* what, int32_t block_id) {
  if (num_misuses_++ == 0) first_misuse_ = std::string(what) + " " + std::to_string(block_id);
}

namespace {
Status violation(const std::string& what, int32_t block_id) {
  return internal_error("block pool integrity violated: " + what + " (block " +
                        std::to_string(block_id) + ")");
}
}  // namespace

Status BlockPool::check_integrity() const {
  if (num_misuses_ > 0) {
    return internal_error("block pool integrity violated: " + std::to_string(num_misuses_) +
                          " invalid call(s) were ignored, the first: " + first_misuse_);
  }
  std::vector<uint8_t> seen(blocks_.size(), 0);
  KITE_RETURN_IF_ERROR(check_lists(seen));
  int32_t num_hashed = 0;
  for (int32_t id = 0; id < num_blocks(); ++id) {
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (b.has_hash) ++num_hashed;
    if (seen[static_cast<size_t>(id)]) continue;  // free or evictable, already checked
    if (b.place != Place::kInUse) return violation("block is on no list but not in use", id);
    if (b.ref_count <= 0) return violation("in-use block has ref_count <= 0", id);
  }
  if (num_hashed != num_cached_blocks()) {
    return internal_error("block pool integrity violated: " + std::to_string(num_hashed) +
                          " blocks carry a hash but the hash map has " +
                          std::to_string(num_cached_blocks()) + " entries");
  }
  return check_hash_map();
}

// Walks the free list and the LRU list, marking each block seen; a block seen twice is in two
// places at once.
Status BlockPool::check_lists(std::vector<uint8_t>& seen) const {
  for (int32_t id : free_list_) {
    if (!valid_id(id)) return violation("free list holds an invalid id", id);
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (seen[static_cast<size_t>(id)]) return violation("block is on the free list twice", id);
    seen[static_cast<size_t>(id)] = 1;
    if (b.place != Place::kFree) return violation("free-list block not marked free", id);
    if (b.ref_count != 0) return violation("free block has a non-zero ref_count", id);
    if (b.has_hash) return violation("free block still carries a hash", id);
  }
  int32_t count = 0;
  int32_t prev = kNoBlock;
  for (int32_t id = lru_head_; id != kNoBlock; id = blocks_[static_cast<size_t>(id)].lru_next) {
    if (!valid_id(id)) return violation("LRU list holds an invalid id", id);
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (seen[static_cast<size_t>(id)]) return violation("block is on two lists (or twice)", id);
    seen[static_cast<size_t>(id)] = 1;
    if (b.place != Place::kEvictable) return violation("LRU block not marked evictable", id);
    if (b.ref_count != 0) return violation("evictable block has a non-zero ref_count", id);
    if (!b.has_hash) return violation("evictable block has no hash", id);
    if (b.lru_prev != prev) return violation("LRU back link is wrong", id);
    prev = id;
    ++count;
  }
  if (prev != lru_tail_) return violation("LRU tail does not end the list", lru_tail_);
  if (count != num_evictable_) {
    return internal_error("block pool integrity violated: LRU list has " + std::to_string(count) +
                          " blocks but the evictable count is " + std::to_string(num_evictable_));
  }
  return ok_status();
}

Status BlockPool::check_hash_map() const {
  for (const auto& [hash, id] : hash_to_block_) {
    if (!valid_id(id)) return violation("hash map points at an invalid id", id);
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (!b.has_hash || !(b.hash == hash)) {
      return violation("hash map entry disagrees with the block's own hash", id);
    }
    if (b.place == Place::kFree) return violation("hash map points at a free block", id);
  }
  return ok_status();
}

}  // namespace kite::cache
