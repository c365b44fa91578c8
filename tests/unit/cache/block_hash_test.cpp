#include "cache/block_hash.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kite::cache {
namespace {

std::vector<int32_t> random_tokens(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> tok(1, 150000);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = tok(rng);
  return t;
}

TEST(BlockHash, ChainDependsOnWholePrefixAndSalt) {
  std::mt19937 rng(7);
  const std::vector<int32_t> a = random_tokens(rng, 64);
  std::vector<int32_t> b = a;
  b[3] ^= 1;  // differs only in block 0
  const BlockHash root = root_block_hash("model-a");
  std::vector<BlockHash> ha, hb;
  extend_block_hashes(root, a, 16, ha);
  extend_block_hashes(root, b, 16, hb);
  ASSERT_EQ(ha.size(), 4u);
  ASSERT_EQ(hb.size(), 4u);
  // Block 3's tokens are equal, but the chain carries block 0's difference forward.
  for (size_t i = 0; i < 4; ++i) EXPECT_FALSE(ha[i] == hb[i]) << i;
  std::vector<BlockHash> hc;
  extend_block_hashes(root_block_hash("model-b"), a, 16, hc);
  for (size_t i = 0; i < 4; ++i) EXPECT_FALSE(ha[i] == hc[i]) << i;
  EXPECT_FALSE(root_block_hash("") == root_block_hash("x"));
}

TEST(BlockHash, IncrementalEqualsFromScratchAndIgnoresPartialBlock) {
  std::mt19937 rng(11);
  for (int32_t block_size : {1, 16, 100}) {  // 100 exercises the streaming path
    const std::vector<int32_t> t = random_tokens(rng, 1000);
    const BlockHash root = root_block_hash("s");
    std::vector<BlockHash> whole, incremental;
    extend_block_hashes(root, t, block_size, whole);
    EXPECT_EQ(whole.size(), t.size() / static_cast<size_t>(block_size));
    std::uniform_int_distribution<size_t> step(1, 300);
    for (size_t n = 0; n < t.size();) {
      n = std::min(t.size(), n + step(rng));
      extend_block_hashes(root, std::span<const int32_t>(t).first(n), block_size, incremental);
      EXPECT_EQ(incremental.size(), n / static_cast<size_t>(block_size));
    }
    ASSERT_EQ(incremental.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) EXPECT_TRUE(whole[i] == incremental[i]);
    // Hashes are unrelated to each other (no trivial structure like equal halves).
    for (size_t i = 1; i < whole.size(); ++i) EXPECT_FALSE(whole[i] == whole[i - 1]);
  }
}

}  // namespace
}  // namespace kite::cache
