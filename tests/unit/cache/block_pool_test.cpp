#include "cache/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

namespace kite::cache {
namespace {

BlockHash hash_of(uint64_t i) { return BlockHash{i * 0x9E3779B97F4A7C15ull + 1, ~i}; }

BlockPool make_pool(int32_t num_blocks) {
  auto pool = BlockPool::create({.num_blocks = num_blocks, .block_size = 16});
  EXPECT_TRUE(pool.ok()) << pool.status().message();
  return std::move(pool).value();
}

TEST(BlockPool, RejectsBadConfig) {
  EXPECT_FALSE(BlockPool::create({.num_blocks = 0, .block_size = 16}).ok());
  EXPECT_FALSE(BlockPool::create({.num_blocks = 4, .block_size = 0}).ok());
}

TEST(BlockPool, AllocateIsAllOrNothing) {
  BlockPool pool = make_pool(5);
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.allocate(3, got));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_FALSE(pool.allocate(3, got));
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.6);
  EXPECT_TRUE(pool.check_integrity().ok());
}

// Evictable blocks leave least recently used first; reviving a block refreshes it; eviction
// only starts once the free list is empty.
TEST(BlockPool, EvictsLeastRecentlyUsedFirst) {
  BlockPool pool = make_pool(5);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.allocate(4, b));  // blocks 0..3; block 4 stays free
  for (int32_t i = 0; i < 4; ++i) ASSERT_TRUE(pool.cache_block(b[i], hash_of(i)));
  pool.decref(b[2]);
  pool.decref(b[0]);
  pool.decref(b[3]);
  pool.decref(b[1]);
  EXPECT_EQ(pool.evictable_lru_order(), (std::vector<int32_t>{2, 0, 3, 1}));
  // Revive block 0 (a prefix hit), then release it again: now the most recently used.
  ASSERT_EQ(pool.lookup(hash_of(0)), std::optional<int32_t>(0));
  pool.incref(0);
  EXPECT_EQ(pool.num_evictable_blocks(), 3);
  pool.decref(0);
  EXPECT_EQ(pool.evictable_lru_order(), (std::vector<int32_t>{2, 3, 1, 0}));

  std::vector<int32_t> fresh;
  ASSERT_TRUE(pool.allocate(1, fresh));
  EXPECT_EQ(fresh.back(), 4);  // the free block goes first; nothing evicted yet
  EXPECT_EQ(pool.num_cached_blocks(), 4);
  ASSERT_TRUE(pool.allocate(2, fresh));
  EXPECT_EQ(fresh[1], 2);
  EXPECT_EQ(fresh[2], 3);
  EXPECT_FALSE(pool.lookup(hash_of(2)).has_value());
  EXPECT_FALSE(pool.lookup(hash_of(3)).has_value());
  EXPECT_EQ(pool.lookup(hash_of(1)), std::optional<int32_t>(1));
  EXPECT_FALSE(pool.is_cached(2));
  EXPECT_TRUE(pool.check_integrity().ok());
}

TEST(BlockPool, DuplicateHashStaysPrivateAndIsFreedNormally) {
  BlockPool pool = make_pool(4);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.allocate(2, b));
  ASSERT_TRUE(pool.cache_block(b[0], hash_of(9)));
  EXPECT_FALSE(pool.cache_block(b[1], hash_of(9)));
  EXPECT_TRUE(pool.cache_block(b[0], hash_of(9)));   // idempotent
  EXPECT_FALSE(pool.cache_block(b[0], hash_of(8)));  // a block keeps its first hash
  pool.decref(b[1]);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  pool.decref(b[0]);
  EXPECT_EQ(pool.num_evictable_blocks(), 1);
  EXPECT_TRUE(pool.check_integrity().ok());
}

TEST(BlockPool, MisuseIsIgnoredAndReported) {
  BlockPool pool = make_pool(3);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.allocate(1, b));
  pool.decref(b[0]);
  ASSERT_TRUE(pool.check_integrity().ok());
  pool.decref(b[0]);  // double free
  pool.incref(7);     // out of range
  EXPECT_EQ(pool.num_free_blocks(), 3);
  const Status st = pool.check_integrity();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("2 invalid call"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("decref of an unreferenced block 0"), std::string::npos);
}

// A reference model of the pool, checked against the real one after every random operation.
struct PoolModel {
  std::vector<int32_t> held;  // one entry per reference the test holds
  std::map<int32_t, uint64_t> hash_of_block;
  std::map<uint64_t, int32_t> block_of_hash;
  std::vector<int32_t> lru;  // evictable blocks, least recently used first
  std::vector<int32_t> refs;

  void drop_ref(int32_t id) {
    if (--refs[id] == 0 && hash_of_block.contains(id)) lru.push_back(id);
  }
};

TEST(BlockPool, RandomOperationsKeepInvariantsAndNeverLeak) {
  constexpr int32_t kNumBlocks = 48;
  std::mt19937 rng(20240611);
  BlockPool pool = make_pool(kNumBlocks);
  PoolModel m;
  m.refs.assign(kNumBlocks, 0);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  int evictions = 0, revivals = 0, failed_allocs = 0;
  for (int op = 0; op < 20000; ++op) {
    switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
      case 0:
      case 1: {  // allocate
        const int32_t k = static_cast<int32_t>(1 + pick(4));
        const int32_t allocatable =
            kNumBlocks - static_cast<int32_t>(std::count_if(m.refs.begin(), m.refs.end(),
                                                            [](int32_t r) { return r > 0; }));
        std::vector<int32_t> got;
        const bool ok = pool.allocate(k, got);
        ASSERT_EQ(ok, k <= allocatable) << "op " << op;
        if (!ok) {
          ++failed_allocs;
          break;
        }
        for (int32_t id : got) {
          ASSERT_EQ(m.refs[id], 0) << "handed out a referenced block";
          if (auto it = m.hash_of_block.find(id); it != m.hash_of_block.end()) {
            // Allocation may only take a cached block when no block is free: and then the LRU one.
            ASSERT_FALSE(m.lru.empty());
            ASSERT_EQ(m.lru.front(), id) << "evicted out of LRU order";
            m.lru.erase(m.lru.begin());
            m.block_of_hash.erase(it->second);
            m.hash_of_block.erase(it);
            ++evictions;
          }
          m.refs[id] = 1;
          m.held.push_back(id);
        }
        break;
      }
      case 2:
      case 3:
      case 4: {  // free one reference
        if (m.held.empty()) break;
        const size_t i = pick(m.held.size());
        const int32_t id = m.held[i];
        m.held.erase(m.held.begin() + static_cast<long>(i));
        pool.decref(id);
        m.drop_ref(id);
        break;
      }
      case 5: {  // share
        if (m.held.empty()) break;
        const int32_t id = m.held[pick(m.held.size())];
        pool.incref(id);
        ++m.refs[id];
        m.held.push_back(id);
        break;
      }
      case 6:
      case 7: {  // cache a held block under a hash from a small space (collisions)
        if (m.held.empty()) break;
        const int32_t id = m.held[pick(m.held.size())];
        const uint64_t h = pick(96);
        bool expect;
        if (auto it = m.hash_of_block.find(id); it != m.hash_of_block.end()) {
          expect = it->second == h;
        } else if (m.block_of_hash.contains(h)) {
          expect = false;
        } else {
          expect = true;
          m.hash_of_block[id] = h;
          m.block_of_hash[h] = id;
        }
        ASSERT_EQ(pool.cache_block(id, hash_of(h)), expect) << "op " << op;
        break;
      }
      case 8: {  // prefix hit: look a hash up (often an evictable one's) and share its block
        const uint64_t h =
            !m.lru.empty() && pick(2) == 0 ? m.hash_of_block[m.lru[pick(m.lru.size())]] : pick(96);
        const auto got = pool.lookup(hash_of(h));
        auto it = m.block_of_hash.find(h);
        ASSERT_EQ(got.has_value(), it != m.block_of_hash.end());
        if (!got) break;
        ASSERT_EQ(*got, it->second);
        if (m.refs[*got] == 0) {
          std::erase(m.lru, *got);
          ++revivals;
        }
        pool.incref(*got);
        ++m.refs[*got];
        m.held.push_back(*got);
        break;
      }
      case 9: {  // explicit eviction
        const auto got = pool.evict_lru();
        ASSERT_EQ(got.has_value(), !m.lru.empty());
        if (!got) break;
        ASSERT_EQ(*got, m.lru.front());
        m.lru.erase(m.lru.begin());
        m.block_of_hash.erase(m.hash_of_block[*got]);
        m.hash_of_block.erase(*got);
        ++evictions;
        break;
      }
    }
    const Status st = pool.check_integrity();
    ASSERT_TRUE(st.ok()) << "op " << op << ": " << st.message();
    ASSERT_EQ(pool.num_evictable_blocks(), static_cast<int32_t>(m.lru.size()));
    ASSERT_EQ(pool.num_cached_blocks(), static_cast<int32_t>(m.hash_of_block.size()));
    if (op % 64 == 0) {
      ASSERT_EQ(pool.evictable_lru_order(), m.lru) << "op " << op;
      for (int32_t id = 0; id < kNumBlocks; ++id) ASSERT_EQ(pool.ref_count(id), m.refs[id]);
    }
  }
  // The walk must have exercised every path, or it proves little.
  std::printf("evictions %d revivals %d failed allocations %d\n", evictions, revivals,
              failed_allocs);
  EXPECT_GT(evictions, 100);
  EXPECT_GT(revivals, 100);
  EXPECT_GT(failed_allocs, 10);

  for (int32_t id : m.held) pool.decref(id);
  EXPECT_EQ(pool.num_in_use_blocks(), 0);
  EXPECT_EQ(pool.num_free_blocks() + pool.num_evictable_blocks(), kNumBlocks);
  while (pool.evict_lru()) {
  }
  EXPECT_EQ(pool.num_free_blocks(), kNumBlocks);
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_TRUE(pool.check_integrity().ok());
}

}  // namespace
}  // namespace kite::cache
