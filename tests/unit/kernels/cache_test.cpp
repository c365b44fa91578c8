#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "kernel_test_util.h"
#include "kernels/ops.h"

namespace kite {
namespace {

using testing::random_tensor;

TEST(WriteCache, CopiesRowsToSlotsAndLeavesOthers) {
  std::mt19937 rng(41);
  const int64_t num_blocks = 4, block_size = 16, kv_heads = 2, head_dim = 8;
  const int64_t width = kv_heads * head_dim;
  Tensor cache = random_tensor({num_blocks, block_size, kv_heads, head_dim}, rng);
  const Tensor before = cache.clone();
  Tensor src = random_tensor({5, kv_heads, head_dim}, rng, 5.0f, 6.0f);
  const std::vector<int64_t> slots = {0, 15, 16, 63, 40};
  ops::write_cache(src, slots, cache);
  for (int64_t slot = 0; slot < num_blocks * block_size; ++slot) {
    int64_t token = -1;
    for (size_t t = 0; t < slots.size(); ++t)
      if (slots[t] == slot) token = static_cast<int64_t>(t);
    for (int64_t j = 0; j < width; ++j) {
      const float want = token >= 0 ? src.f32()[token * width + j] : before.f32()[slot * width + j];
      ASSERT_EQ(cache.f32()[slot * width + j], want) << "slot " << slot << " j " << j;
    }
  }
}

TEST(WriteCache, RejectsBadSlotsAndShapes) {
  std::mt19937 rng(42);
  Tensor cache = random_tensor({2, 4, 1, 3}, rng);
  const Tensor before = cache.clone();
  Tensor src = random_tensor({2, 3}, rng);
  const std::vector<int64_t> out_of_range = {1, 8};
  const std::vector<int64_t> negative = {-1, 0};
  EXPECT_THROW(ops::write_cache(src, out_of_range, cache), std::invalid_argument);
  EXPECT_THROW(ops::write_cache(src, negative, cache), std::invalid_argument);
  for (int64_t i = 0; i < cache.numel(); ++i) ASSERT_EQ(cache.f32()[i], before.f32()[i]);
  Tensor wide = random_tensor({2, 4}, rng);
  const std::vector<int64_t> ok = {0, 1};
  EXPECT_THROW(ops::write_cache(wide, ok, cache), std::invalid_argument);
  const std::vector<int64_t> too_few = {0};
  EXPECT_THROW(ops::write_cache(src, too_few, cache), std::invalid_argument);
}

}  // namespace
}  // namespace kite
