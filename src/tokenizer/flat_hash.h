// Open-addressing hash tables for the tokenizer's hot lookups (vocabulary by bytes, BPE merges,
// the piece cache). std::unordered_map chases a pointer per node; these keep slots contiguous
// (linear probing, power-of-two capacity, load <= 1/2) so a lookup is usually one cache line
// plus the key bytes. Single-writer: callers synchronize inserts with lookups themselves.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace kite {

inline uint64_t hash_bytes(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

// Byte-string keys (copied into an arena) -> trivially copyable V.
template <typename V>
class FlatStringMap {
 public:
  explicit FlatStringMap(size_t expected = 16) { rehash(capacity_for(expected)); }

  const V* find(std::string_view key) const { return find(key, hash_bytes(key)); }
  const V* find(std::string_view key, uint64_t hash) const {
    hash |= 1;  // 0 marks an empty slot
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.hash == 0) return nullptr;
      if (s.hash == hash && s.key_len == key.size() &&
          std::memcmp(arena_.data() + s.key_offset, key.data(), key.size()) == 0) {
        return &s.value;
      }
    }
  }

  // Inserts or overwrites.
  void insert(std::string_view key, const V& value) { insert(key, hash_bytes(key), value); }
  void insert(std::string_view key, uint64_t hash, const V& value) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    hash |= 1;
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.hash == 0) {
        s = {hash, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), value};
        arena_.append(key);
        ++size_;
        return;
      }
      if (s.hash == hash && s.key_len == key.size() &&
          std::memcmp(arena_.data() + s.key_offset, key.data(), key.size()) == 0) {
        s.value = value;
        return;
      }
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t key_len = 0;
    V value{};
  };

  static size_t capacity_for(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    return cap;
  }

  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.hash == 0) continue;
      uint64_t i = s.hash & mask_;
      while (slots_[i].hash != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::string arena_;
  size_t size_ = 0;
  uint64_t mask_ = 0;
};

// uint64 keys (never UINT64_MAX, the empty marker) -> trivially copyable V.
template <typename V>
class FlatU64Map {
 public:
  explicit FlatU64Map(size_t expected = 16) {
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }

  const V* find(uint64_t key) const {
    for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

  // Inserts or overwrites. The map does not grow: construct it with the final size.
  void insert(uint64_t key, const V& value) {
    for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key || s.key == kEmpty) {
        s = {key, value};
        return;
      }
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    V value{};
  };
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }

  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
};

}  // namespace kite
