#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/head_linear.h"
#include "kernels/ops.h"
#include "support/rope_cos_sin.h"

namespace kite::cuda {
namespace {

using namespace testing;
using ops::RopeStyle;
using test_support::make_cos_sin;

struct RopeCase {
  DType dtype;
  RopeStyle style;
  int64_t tokens, heads, head_dim, rot_offset, rot_dim;
};

class CudaRopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(CudaRopeTest, MatchesCpu) {
  const RopeCase c = GetParam();
  auto rng = test_rng();
  Tensor x = random_host({c.tokens, c.heads, c.head_dim}, rng, -2.0f, 2.0f);
  round_to(x, c.dtype);
  Tensor cos, sin;
  make_cos_sin(c.tokens, c.rot_dim, rng, cos, sin);
  Tensor dx = upload(x, c.dtype);
  ops::rope(x, c.rot_offset, c.rot_dim, cos, sin, c.style);
  rope(dx, c.rot_offset, c.rot_dim, upload(cos, DType::kF32), upload(sin, DType::kF32), c.style,
       test_stream());
  KITE_EXPECT_CLOSE(download(dx), x, tolerance(c.dtype));
}

// Llama (full 128), a partial rotation, DeepSeek q (rope dims after 128 nope dims, 128 heads:
// two head chunks per token), the MLA latent (1 head of 576, rope over the last 64).
INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaRopeTest,
    ::testing::Values(RopeCase{DType::kF32, RopeStyle::kNeox, 9, 32, 128, 0, 128},
                      RopeCase{DType::kBF16, RopeStyle::kNeox, 9, 32, 128, 0, 128},
                      RopeCase{DType::kF32, RopeStyle::kNeox, 5, 4, 128, 32, 64},
                      RopeCase{DType::kF32, RopeStyle::kInterleaved, 7, 128, 192, 128, 64},
                      RopeCase{DType::kBF16, RopeStyle::kInterleaved, 7, 128, 192, 128, 64},
                      RopeCase{DType::kF32, RopeStyle::kInterleaved, 11, 1, 576, 512, 64},
                      RopeCase{DType::kBF16, RopeStyle::kInterleaved, 1, 1, 576, 512, 64}));

// Unique random slots, plus a padding slot (-1) and one past the cache: both must be skipped.
std::vector<int64_t> make_slots(int64_t tokens, int64_t num_slots, std::mt19937& rng) {
  std::vector<int64_t> all(num_slots);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> slots(all.begin(), all.begin() + tokens);
  slots[tokens / 2] = -1;
  slots[tokens - 1] = num_slots;
  return slots;
}

// CPU reference of a cache write that skips out-of-range slots.
void cpu_write_valid(const Tensor& src, const std::vector<int64_t>& slots, int64_t num_slots,
                     Tensor& cache) {
  const int64_t width = src.numel() / src.size(0);
  std::vector<int64_t> keep_slots;
  std::vector<float> rows;
  for (size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0 || slots[t] >= num_slots) continue;
    keep_slots.push_back(slots[t]);
    rows.insert(rows.end(), src.data<float>() + t * width, src.data<float>() + (t + 1) * width);
  }
  Tensor kept = Tensor::from_vector(rows, {static_cast<int64_t>(keep_slots.size()), width});
  ops::write_cache(kept, keep_slots, cache);
}

TEST(CudaWriteCache, MatchesCpuAndSkipsInvalidSlots) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    auto rng = test_rng();
    const int64_t tokens = 13, blocks = 6, block_size = 4, heads = 2, dim = 96;
    Tensor src = random_host({tokens, heads, dim}, rng);
    Tensor cache = random_host({blocks, block_size, heads, dim}, rng);  // old contents
    round_to(src, dtype);
    round_to(cache, dtype);
    const auto slots = make_slots(tokens, blocks * block_size, rng);
    Tensor dcache = upload(cache, dtype);
    write_cache(upload(src, dtype),
                to_device(std::span<const int64_t>(slots), {tokens}, test_stream()), dcache,
                test_stream());
    cpu_write_valid(src, slots, blocks * block_size, cache);
    EXPECT_EQ(rel_error(download(dcache), cache), 0.0) << dtype_label(dtype);
  }
}

struct FusedCase {
  DType dtype;
  RopeStyle style;
  int64_t tokens, q_heads, q_dim, q_offset, kv_heads, k_dim, k_offset, v_dim, rot_dim;
  bool with_q;
};

class CudaRopeAndCacheTest : public ::testing::TestWithParam<FusedCase> {};

TEST_P(CudaRopeAndCacheTest, MatchesRopeThenWriteCache) {
  const FusedCase c = GetParam();
  auto rng = test_rng();
  const int64_t blocks = 2 * c.tokens / 16 + 3, block_size = 16, num_slots = blocks * block_size;
  Tensor q = random_host({c.tokens, c.q_heads, c.q_dim}, rng, -2.0f, 2.0f);
  Tensor k = random_host({c.tokens, c.kv_heads, c.k_dim}, rng, -2.0f, 2.0f);
  Tensor v = random_host({c.tokens, c.kv_heads, std::max<int64_t>(c.v_dim, 1)}, rng);
  Tensor k_cache = random_host({blocks, block_size, c.kv_heads, c.k_dim}, rng);
  Tensor v_cache =
      random_host({blocks, block_size, c.kv_heads, std::max<int64_t>(c.v_dim, 1)}, rng);
  for (Tensor* t : {&q, &k, &v, &k_cache, &v_cache}) round_to(*t, c.dtype);
  Tensor cos, sin;
  make_cos_sin(c.tokens, c.rot_dim, rng, cos, sin);
  const auto slots = make_slots(c.tokens, num_slots, rng);

  Tensor dq = upload(q, c.dtype), dk = upload(k, c.dtype), dv = upload(v, c.dtype);
  Tensor dk_cache = upload(k_cache, c.dtype), dv_cache = upload(v_cache, c.dtype);
  Tensor dcos = upload(cos, DType::kF32), dsin = upload(sin, DType::kF32);
  Tensor dslots = to_device(std::span<const int64_t>(slots), {c.tokens}, test_stream());
  RopeCacheParams p;
  p.q = c.with_q ? &dq : nullptr;
  p.q_rot_offset = c.q_offset;
  p.k = &dk;
  p.k_rot_offset = c.k_offset;
  p.v = c.v_dim > 0 ? &dv : nullptr;
  p.k_cache = &dk_cache;
  p.v_cache = c.v_dim > 0 ? &dv_cache : nullptr;
  p.rot_dim = c.rot_dim;
  p.style = c.style;
  p.cos = &dcos;
  p.sin = &dsin;
  p.slot_mapping = &dslots;
  rope_and_cache(p, test_stream());

  Tensor q_ref = q.clone();
  if (c.with_q) ops::rope(q_ref, c.q_offset, c.rot_dim, cos, sin, c.style);
  ops::rope(k, c.k_offset, c.rot_dim, cos, sin, c.style);
  cpu_write_valid(k, slots, num_slots, k_cache);
  if (c.v_dim > 0) cpu_write_valid(v, slots, num_slots, v_cache);
  const double tol = tolerance(c.dtype);
  KITE_EXPECT_CLOSE(download(dq), q_ref, tol);
  KITE_EXPECT_CLOSE(download(dk), k, tol);
  KITE_EXPECT_CLOSE(download(dk_cache), k_cache, tol);
  KITE_EXPECT_CLOSE(download(dv_cache), v_cache, tol);

  // Again with q_out (MLA's absorbed query): q's rotated dims land in q_out's last rot_dim
  // columns, q stays as it was, and q_out's other columns are not written.
  if (!c.with_q) return;
  const Tensor in_place = download(dq);
  Tensor dq2 = upload(q, c.dtype);
  const int64_t out_dim = c.q_dim + c.rot_dim + 8, out_off = c.q_dim + 8;
  Tensor dq_out = device_poisoned({c.tokens, c.q_heads, out_dim}, c.dtype);
  p.q = &dq2;
  p.q_out = &dq_out;
  p.q_out_offset = out_off;
  rope_and_cache(p, test_stream());
  EXPECT_EQ(rel_error(download(dq2), round_to(q, c.dtype)), 0.0);
  const Tensor got = download(dq_out);
  Tensor got_rot = Tensor::empty({c.tokens * c.q_heads, c.rot_dim});
  Tensor want_rot = Tensor::empty({c.tokens * c.q_heads, c.rot_dim});
  for (int64_t r = 0; r < c.tokens * c.q_heads; ++r) {
    const float* row = got.data<float>() + r * out_dim;
    std::copy_n(row + out_off, c.rot_dim, got_rot.data<float>() + r * c.rot_dim);
    std::copy_n(in_place.data<float>() + r * c.q_dim + c.q_offset, c.rot_dim,
                want_rot.data<float>() + r * c.rot_dim);
    ASSERT_TRUE(all_nan(row, out_off)) << "row " << r;
    ASSERT_TRUE(all_nan(row + out_off + c.rot_dim, out_dim - out_off - c.rot_dim)) << "row " << r;
  }
  EXPECT_EQ(rel_error(got_rot, want_rot), 0.0);  // the same arithmetic as the in-place run
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaRopeAndCacheTest,
    ::testing::Values(
        // Llama-3-8B: 32 q heads, 8 kv heads, 128 dims, neox over all of them.
        FusedCase{DType::kF32, RopeStyle::kNeox, 21, 32, 128, 0, 8, 128, 0, 128, 128, true},
        FusedCase{DType::kBF16, RopeStyle::kNeox, 21, 32, 128, 0, 8, 128, 0, 128, 128, true},
        // DeepSeek MLA: q [16, 192] rope after 128; latent [1, 576] rope after 512; no v.
        FusedCase{DType::kF32, RopeStyle::kInterleaved, 19, 16, 192, 128, 1, 576, 512, 0, 64, true},
        FusedCase{DType::kBF16, RopeStyle::kInterleaved, 19, 16, 192, 128, 1, 576, 512, 0, 64,
                  false},
        // Rows whose widths take 16-byte accesses in F32 (4 values) but not in BF16 (8), a
        // rope range off dim 0, v copied whole per token (prefill: 16 or more tokens).
        FusedCase{DType::kF32, RopeStyle::kNeox, 17, 4, 36, 4, 2, 36, 4, 20, 24, true},
        FusedCase{DType::kBF16, RopeStyle::kNeox, 17, 4, 36, 4, 2, 36, 4, 20, 24, true},
        // The same at decode (one token: a block per head).
        FusedCase{DType::kBF16, RopeStyle::kInterleaved, 1, 16, 192, 128, 1, 576, 512, 0, 64,
                  true}));

// MLA's latent row with its kv_a norm in the same launch (RopeCacheParams::k_norm_*): k's first
// `width` columns of every head row RMS-normalised in place, then the rope dims rotated and
// the rows stored — against ops::rms_norm on those columns, ops::rope and the cache write. One
// token (a block per head) and 19 (a block per token, both heads in it); two kv heads, so
// every head row gets its own norm.
TEST(CudaRopeAndCache, NormalisesThePrefixOfKFirst) {
  auto rng = test_rng();
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int64_t tokens : {1, 19}) {
      SCOPED_TRACE(::testing::Message() << dtype_label(dtype) << " T=" << tokens);
      const int64_t heads = 2, dim = 576, width = 512, rot = 64, block_size = 16;
      const int64_t blocks = 2 * tokens / 16 + 3, num_slots = blocks * block_size;
      Tensor k = random_host({tokens, heads, dim}, rng, -2.0f, 2.0f);
      Tensor weight = random_host({width}, rng, 0.5f, 1.5f);
      Tensor k_cache = random_host({blocks, block_size, heads, dim}, rng);
      for (Tensor* t : {&k, &weight, &k_cache}) round_to(*t, dtype);
      Tensor cos, sin;
      make_cos_sin(tokens, rot, rng, cos, sin);
      const auto slots = make_slots(tokens, num_slots, rng);
      Tensor dk = upload(k, dtype), dk_cache = upload(k_cache, dtype), dw = upload(weight, dtype);
      Tensor dcos = upload(cos, DType::kF32), dsin = upload(sin, DType::kF32);
      Tensor dslots = to_device(std::span<const int64_t>(slots), {tokens}, test_stream());
      RopeCacheParams p;
      p.k = &dk;
      p.k_rot_offset = width;
      p.k_cache = &dk_cache;
      p.rot_dim = rot;
      p.style = RopeStyle::kInterleaved;
      p.cos = &dcos;
      p.sin = &dsin;
      p.slot_mapping = &dslots;
      p.k_norm_weight = &dw;
      p.k_norm_width = width;
      p.k_norm_eps = 1e-6f;
      rope_and_cache(p, test_stream());

      // The reference: each head row's prefix through the CPU norm (rounded to the dtype as
      // the kernel stores it), then rope and the cache write.
      Tensor prefix = Tensor::empty({tokens * heads, width});
      for (int64_t r = 0; r < tokens * heads; ++r)
        std::copy_n(k.data<float>() + r * dim, width, prefix.data<float>() + r * width);
      Tensor normed = Tensor::empty({tokens * heads, width});
      ops::rms_norm(prefix, weight, 1e-6f, normed);
      round_to(normed, dtype);
      for (int64_t r = 0; r < tokens * heads; ++r)
        std::copy_n(normed.data<float>() + r * width, width, k.data<float>() + r * dim);
      ops::rope(k, width, rot, cos, sin, RopeStyle::kInterleaved);
      cpu_write_valid(k, slots, num_slots, k_cache);
      KITE_EXPECT_CLOSE(download(dk), k, tolerance(dtype));
      KITE_EXPECT_CLOSE(download(dk_cache), k_cache, tolerance(dtype));
    }
  }
  // The norm must end before the rotary dims and have one weight per column.
  Tensor k = device_empty({1, 1, 576}, DType::kBF16);
  Tensor cache = device_empty({1, 16, 1, 576}, DType::kBF16);
  Tensor cos = device_empty({1, 32}, DType::kF32), sin = device_empty({1, 32}, DType::kF32);
  Tensor slots = device_empty({1}, DType::kI64);
  Tensor w = device_empty({520}, DType::kBF16);
  RopeCacheParams p;
  p.k = &k;
  p.k_rot_offset = 512;
  p.k_cache = &cache;
  p.rot_dim = 64;
  p.cos = &cos;
  p.sin = &sin;
  p.slot_mapping = &slots;
  p.k_norm_weight = &w;
  p.k_norm_width = 520;
  EXPECT_THROW(rope_and_cache(p, test_stream()), std::invalid_argument);
  p.k_norm_width = 512;
  EXPECT_THROW(rope_and_cache(p, test_stream()), std::invalid_argument);
}

// MLA's absorbed query product in the rope launch (RopeCacheParams::head_*): the whole MLA
// attention input step — latent norm, rope of q into q_out's last columns and of the latent,
// the cache write, and q_out's first 512 columns = W_UK^T q_nope per head — against the rope
// launch without it followed by head_gemv: every output equal bit for bit (the same kernels'
// arithmetic), at 1, 3 and 4 tokens. Then the overlaps it refuses.
TEST(CudaRopeAndCache, HeadProductInTheLaunchEqualsTheRopeThenHeadGemv) {
  auto rng = test_rng();
  const int64_t heads = 16, nope = 128, rot = 64, rank = 512, width = rank + rot;
  const int64_t block_size = 16, blocks = 4, num_slots = blocks * block_size;
  for (const int64_t tokens : {1, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "T=" << tokens);
    Tensor q = random_host({tokens, heads, nope + rot}, rng, -2.0f, 2.0f);
    Tensor k = random_host({tokens, 1, width}, rng, -2.0f, 2.0f);
    Tensor w_uk = random_host({heads, rank, nope}, rng, -0.2f, 0.2f);
    Tensor norm_w = random_host({rank}, rng, 0.5f, 1.5f);
    Tensor cos, sin;
    make_cos_sin(tokens, rot, rng, cos, sin);
    const auto slots = make_slots(tokens, num_slots, rng);
    const Tensor dq = upload(q, DType::kBF16), dw = upload(w_uk, DType::kBF16);
    const Tensor dnorm = upload(norm_w, DType::kBF16);
    Tensor dcos = upload(cos, DType::kF32), dsin = upload(sin, DType::kF32);
    Tensor dslots = to_device(std::span<const int64_t>(slots), {tokens}, test_stream());
    Tensor q_in = dq;  // rope_and_cache takes q mutable; with q_out it is only read
    // MLA's step: the latent's norm, q's rope dims into q_out, the latent's into the cache;
    // with the head product q_out's first `rank` columns too.
    auto params = [&](Tensor& dk, Tensor& cache, Tensor& q_out, bool head_product) {
      RopeCacheParams p;
      p.q = &q_in;
      p.q_rot_offset = nope;
      p.q_out = &q_out;
      p.q_out_offset = rank;
      p.k = &dk;
      p.k_rot_offset = rank;
      p.k_cache = &cache;
      p.rot_dim = rot;
      p.style = RopeStyle::kInterleaved;
      p.cos = &dcos;
      p.sin = &dsin;
      p.slot_mapping = &dslots;
      p.k_norm_weight = &dnorm;
      p.k_norm_width = rank;
      p.k_norm_eps = 1e-6f;
      if (head_product) {
        p.head_x = &dq;
        p.head_w = &dw;
        p.head_y = &q_out;
      }
      return p;
    };
    auto run = [&](bool fused, Tensor& dk, Tensor& cache, Tensor& q_out) {
      rope_and_cache(params(dk, cache, q_out, fused), test_stream());
      if (!fused) head_gemv(dq, 0, dw, q_out, 0, test_stream());
    };
    Tensor k_a = upload(k, DType::kBF16), k_b = upload(k, DType::kBF16);
    const Tensor cache = random_host({blocks, block_size, 1, width}, rng);  // slots not written
    Tensor cache_a = upload(cache, DType::kBF16), cache_b = upload(cache, DType::kBF16);
    Tensor out_a = device_poisoned({tokens, heads, width}, DType::kBF16);
    Tensor out_b = device_poisoned({tokens, heads, width}, DType::kBF16);
    run(true, k_a, cache_a, out_a);
    run(false, k_b, cache_b, out_b);
    const Tensor got = download(out_a);
    EXPECT_FALSE(std::any_of(got.data<float>(), got.data<float>() + got.numel(), [](float v) {
      return std::isnan(v);
    })) << "every column of q_out written";
    EXPECT_EQ(rel_error(got, download(out_b)), 0.0);
    EXPECT_EQ(rel_error(download(k_a), download(k_b)), 0.0);
    EXPECT_EQ(rel_error(download(cache_a), download(cache_b)), 0.0);

    // Refused: the product's output over q_out's rotated columns, or over the latent it reads.
    RopeCacheParams bad = params(k_a, cache_a, out_a, true);
    bad.head_y_off = rot;  // columns [64, 576): into the rotated ones
    EXPECT_THROW(rope_and_cache(bad, test_stream()), std::invalid_argument);
    bad.head_y_off = 0;
    bad.head_x = &k_a;  // reads what the rope writes (and the shapes disagree)
    EXPECT_THROW(rope_and_cache(bad, test_stream()), std::invalid_argument);
  }
}

TEST(CudaRopeAndCache, RejectsMissingCache) {
  Tensor k = device_empty({2, 1, 64}, DType::kF32);
  RopeCacheParams p;
  p.k = &k;
  p.rot_dim = 64;
  EXPECT_THROW(rope_and_cache(p, test_stream()), std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
