// FP8 KV cache: write_cache stores fp8(x / scale) and paged_attention decodes fp8 * scale,
// against a float64 attention over the decoded values, through shuffled block tables; the MLA
// latent row's BF16 tail (the rope key) is stored and read back as BF16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "../kernels/kernel_test_util.h"
#include "kernels/ops.h"
#include "model/kv_cache.h"

namespace kite {
namespace {

using testing::all_close;
using testing::random_tensor;

double decode(float x, float scale) {
  return static_cast<double>(fp8e4m3_to_f32(f32_to_fp8e4m3(x * (1.0f / scale)))) * scale;
}

struct Fp8Case {
  int64_t heads = 4, kv_heads = 2, dim = 24, block = 4;
  std::vector<int64_t> seq_lens{11, 6}, q_lens{3, 6};
  bool shared_kv = false;  // MLA: one latent tensor is both K and V
  int64_t bf16_tail = 0;   // shared only: the row's last values stored as BF16
};

// What the cache gives back for value x of column `col` of a dim-wide row.
double stored(float x, float scale, int64_t col, int64_t dim, int64_t tail) {
  if (col >= dim - tail) return bf16_to_f32(f32_to_bf16(x));
  return decode(x, scale);
}

void run_case(const Fp8Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const float k_scale = 0.05f, v_scale = c.shared_kv ? 0.05f : 0.02f;
  const int64_t num_blocks = 12, row = c.kv_heads * c.dim;
  Tensor k_cache =
      Tensor::zeros({num_blocks, c.block, c.kv_heads, c.dim + c.bf16_tail}, DType::kF8E4M3);
  Tensor v_cache = c.shared_kv
                       ? k_cache
                       : Tensor::zeros({num_blocks, c.block, c.kv_heads, c.dim}, DType::kF8E4M3);
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  std::vector<Tensor> keys, values;
  std::vector<int32_t> query_start{0}, seq_lens;
  for (size_t s = 0; s < c.seq_lens.size(); ++s) {
    const int64_t n = c.seq_lens[s];
    std::vector<int32_t> table;
    for (int64_t b = 0; b < (n + c.block - 1) / c.block; ++b) {
      table.push_back(ids.back());
      ids.pop_back();
    }
    Tensor k = random_tensor({n, c.kv_heads, c.dim}, rng, -6.0f, 6.0f);
    Tensor v = c.shared_kv ? k : random_tensor({n, c.kv_heads, c.dim}, rng, -3.0f, 3.0f);
    std::vector<int64_t> slots(n);
    for (int64_t p = 0; p < n; ++p) slots[p] = table[p / c.block] * c.block + p % c.block;
    ops::write_cache(k, slots, k_cache, k_scale, c.bf16_tail);
    if (!c.shared_kv) ops::write_cache(v, slots, v_cache, v_scale);
    tables.push_back(table);
    keys.push_back(k);
    values.push_back(v);
    query_start.push_back(query_start.back() + static_cast<int32_t>(c.q_lens[s]));
    seq_lens.push_back(static_cast<int32_t>(n));
  }
  const int64_t t = query_start.back();
  Tensor q = random_tensor({t, c.heads, c.dim}, rng);
  Tensor out = testing::poisoned({t, c.heads, c.dim});
  ops::PagedAttentionParams p;
  p.query_start = query_start;
  p.seq_lens = seq_lens;
  p.block_tables = &tables;
  p.block_size = c.block;
  p.scale = 0.3f;
  p.k_scale = k_scale;
  p.v_scale = v_scale;
  ops::paged_attention(q, k_cache, v_cache, p, out);

  std::vector<double> want(out.numel());
  const int64_t group = c.heads / c.kv_heads;
  for (size_t s = 0; s < c.seq_lens.size(); ++s)
    for (int64_t i = query_start[s]; i < query_start[s + 1]; ++i)
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t visible =
            seq_lens[s] - (query_start[s + 1] - query_start[s]) + (i - query_start[s]) + 1;
        const int64_t kh = h / group;
        std::vector<double> sc(visible);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < visible; ++j) {
          double d = 0;
          for (int64_t x = 0; x < c.dim; ++x)
            d += q.f32()[(i * c.heads + h) * c.dim + x] *
                 stored(keys[s].f32()[j * row + kh * c.dim + x], k_scale, x, c.dim, c.bf16_tail);
          sc[j] = d * p.scale;
          mx = std::max(mx, sc[j]);
        }
        for (double& v : sc) sum += (v = std::exp(v - mx));
        for (int64_t x = 0; x < c.dim; ++x) {
          double o = 0;
          for (int64_t j = 0; j < visible; ++j)
            o += sc[j] * stored(values[s].f32()[j * row + kh * c.dim + x], v_scale, x, c.dim,
                                c.shared_kv ? c.bf16_tail : 0);
          want[(i * c.heads + h) * c.dim + x] = o / sum;
        }
      }
  EXPECT_TRUE(all_close(out.f32(), want, 1e-4, 1e-5));
}

TEST(KvCacheFp8, AttentionReadsScaledFp8) { run_case(Fp8Case{}, 1); }

TEST(KvCacheFp8, SharedLatentCache) {
  Fp8Case c;
  c.kv_heads = 1;
  c.heads = 3;
  c.shared_kv = true;
  run_case(c, 2);
}

// MLA's FP8 row: 24 values, the last 6 (the rope key) stored as BF16 in 12 bytes after 18
// FP8 codes; attention reads both back.
TEST(KvCacheFp8, SharedLatentCacheWithBf16Tail) {
  Fp8Case c;
  c.kv_heads = 1;
  c.heads = 3;
  c.shared_kv = true;
  c.bf16_tail = 6;
  run_case(c, 4);
}

TEST(KvCacheFp8, Bf16TailBytes) {
  std::mt19937 rng(5);
  const int64_t dim = 10, tail = 4;
  Tensor cache = Tensor::zeros({2, 4, 1, dim + tail}, DType::kF8E4M3);
  Tensor src = random_tensor({1, 1, dim}, rng, -3.0f, 3.0f);
  std::vector<int64_t> slot{5};
  ops::write_cache(src, slot, cache, 0.5f, tail);
  const uint8_t* row = cache.data<uint8_t>() + 5 * (dim + tail);
  for (int64_t i = 0; i < dim - tail; ++i)
    EXPECT_EQ(row[i], f32_to_fp8e4m3(src.f32()[i] * 2.0f)) << i;
  for (int64_t i = 0; i < tail; ++i) {
    const uint16_t b = f32_to_bf16(src.f32()[dim - tail + i]);  // unscaled, little-endian
    EXPECT_EQ(row[dim - tail + 2 * i], b & 0xff) << i;
    EXPECT_EQ(row[dim - tail + 2 * i + 1], b >> 8) << i;
  }
  // The row must be src's width plus the tail exactly: without the tail the same cache is
  // refused (a narrower src is never taken for a tail), as are a tail the row cannot hold, a
  // negative one and a tail in an F32 cache.
  EXPECT_THROW(ops::write_cache(src, slot, cache, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::write_cache(src, slot, cache, 1.0f, tail + 1), std::invalid_argument);
  EXPECT_THROW(ops::write_cache(src, slot, cache, 1.0f, -1), std::invalid_argument);
  Tensor small = Tensor::zeros({2, 4, 1, 3}, DType::kF8E4M3);
  EXPECT_THROW(ops::write_cache(src, slot, small, 1.0f, 2), std::invalid_argument);
  Tensor f32_wide = Tensor::zeros({2, 4, 1, dim + tail});
  EXPECT_THROW(ops::write_cache(src, slot, f32_wide, 1.0f, tail), std::invalid_argument);
}

// The spec sizes an FP8 k row with the tail's extra bytes, and only FP8 rows.
TEST(KvCacheFp8, SpecCountsTheTail) {
  KvCacheSpec spec{2, 1, 80, 80, true, DType::kF32, {}, {}};
  spec.fp8_bf16_tail = 16;
  EXPECT_EQ(spec.k_row(), 80);
  EXPECT_EQ(spec.bytes_per_token(), 2 * 80 * 4);
  spec.dtype = DType::kF8E4M3;
  EXPECT_EQ(spec.k_row(), 96);
  EXPECT_EQ(spec.bytes_per_token(), 2 * 96);
  KvCache cache(spec, 3, 4);
  EXPECT_EQ(cache.k(0).size(3), 96);
}

TEST(KvCacheFp8, WriteRejectsBadScaleAndSlot) {
  std::mt19937 rng(3);
  Tensor cache = Tensor::zeros({2, 4, 1, 8}, DType::kF8E4M3);
  Tensor src = random_tensor({1, 1, 8}, rng);
  std::vector<int64_t> ok_slot{3}, bad_slot{8};
  EXPECT_THROW(ops::write_cache(src, ok_slot, cache, 0.0f), std::invalid_argument);
  EXPECT_THROW(ops::write_cache(src, bad_slot, cache, 1.0f), std::invalid_argument);
  ops::write_cache(src, ok_slot, cache, 0.5f);
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(cache.data<uint8_t>()[3 * 8 + i], f32_to_fp8e4m3(src.f32()[i] * 2.0f));
}

}  // namespace
}  // namespace kite
