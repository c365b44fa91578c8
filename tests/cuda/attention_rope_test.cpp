// Decode attention with the step's rope and cache write inside (paged_decode_attention with a
// DecodeRope, decode_mma.cu) against the two launches it replaces — rope_and_cache, then
// paged_decode_attention — bit for bit in the output and both caches; and against the CPU ops
// (ops::rope, the cache write, ops::paged_attention) within BF16 tolerance. Each sequence's own
// slot holds NaN before the call, so a kernel that attends to the slot's old row instead of the
// step's key yields NaN.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_batch.h"
#include "kernels/cuda/attention/paged_attention.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "support/rope_cos_sin.h"

namespace kite::cuda {
namespace {

using namespace testing;
using test_support::make_cos_sin;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.size_bytes()) == 0;
}

// Rows [T, heads, dim] of `src` into `cache` at `slots` (host, F32).
void write_rows(const Tensor& src, const std::vector<int64_t>& slots, Tensor& cache) {
  const int64_t row = src.numel() / src.size(0);
  for (size_t t = 0; t < slots.size(); ++t)
    std::copy_n(src.data<float>() + t * row, row, cache.data<float>() + slots[t] * row);
}

void check(const AttnCase& c, std::mt19937& rng) {
  SCOPED_TRACE(c.name);
  HostBatch hb = make_host_batch(c, rng);
  const auto seqs = static_cast<int64_t>(c.seqs.size());
  // The step's own slot (position seq_len - 1) of each sequence, NaN until the step stores it.
  std::vector<int64_t> slots;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t pos = c.seqs[s].seq_len - 1;
    slots.push_back(hb.tables[s][pos / c.block_size] * c.block_size + pos % c.block_size);
    std::fill_n(hb.k_cache.data<float>() + slots.back() * c.kv_heads * c.dqk, c.kv_heads * c.dqk,
                nan);
    std::fill_n(hb.v_cache.data<float>() + slots.back() * c.kv_heads * c.dv, c.kv_heads * c.dv,
                nan);
  }
  Tensor k = random_host({seqs, c.kv_heads, c.dqk}, rng);
  Tensor v = random_host({seqs, c.kv_heads, c.dv}, rng);
  round_to(k, DType::kBF16);
  round_to(v, DType::kBF16);
  Tensor cos, sin;
  make_cos_sin(seqs, c.dqk, rng, cos, sin);
  Tensor dcos = upload(cos, DType::kF32), dsin = upload(sin, DType::kF32);
  Tensor dslots = to_device(std::span<const int64_t>(slots), {seqs}, test_stream());

  // The two launches the fused kernel replaces.
  DeviceBatch apart = upload_batch(c, hb);
  Tensor k_apart = upload(k, DType::kBF16), v_apart = upload(v, DType::kBF16);
  RopeCacheParams rp;
  rp.q = &apart.q;
  rp.k = &k_apart;
  rp.v = &v_apart;
  rp.k_cache = &apart.k_cache;
  rp.v_cache = &apart.v_cache;
  rp.rot_dim = c.dqk;
  rp.cos = &dcos;
  rp.sin = &dsin;
  rp.slot_mapping = &dslots;
  rope_and_cache(rp, test_stream());
  Tensor out_apart = device_poisoned({seqs, c.heads, c.dv}, DType::kBF16);
  AttentionWorkspace ws_apart;
  paged_decode_attention(apart.q, apart.k_cache, apart.v_cache, apart.args, ws_apart, out_apart,
                         test_stream());

  // The fused call.
  DeviceBatch fused = upload_batch(c, hb);
  Tensor k_fused = upload(k, DType::kBF16), v_fused = upload(v, DType::kBF16);
  Tensor out_fused = device_poisoned({seqs, c.heads, c.dv}, DType::kBF16);
  AttentionWorkspace ws_fused;
  const DecodeRope rope{&k_fused, &v_fused, &dcos, &dsin, &dslots};
  paged_decode_attention(fused.q, fused.k_cache, fused.v_cache, fused.args, ws_fused, out_fused,
                         test_stream(), &rope);

  const Tensor got = download(out_fused);
  EXPECT_TRUE(same_bits(got, download(out_apart)));
  EXPECT_TRUE(same_bits(download(fused.k_cache), download(apart.k_cache)));
  EXPECT_TRUE(same_bits(download(fused.v_cache), download(apart.v_cache)));
  // q, k and v are only read.
  EXPECT_TRUE(same_bits(download(fused.q), hb.q));
  EXPECT_TRUE(same_bits(download(k_fused), k));
  EXPECT_TRUE(same_bits(download(v_fused), v));

  // The CPU ops: rope (rounded to BF16 as the kernels store it), the cache write, attention.
  Tensor k_rot = k.clone();
  ops::rope(hb.q, 0, c.dqk, cos, sin, ops::RopeStyle::kNeox);
  ops::rope(k_rot, 0, c.dqk, cos, sin, ops::RopeStyle::kNeox);
  round_to(hb.q, DType::kBF16);
  round_to(k_rot, DType::kBF16);
  write_rows(k_rot, slots, hb.k_cache);
  write_rows(v, slots, hb.v_cache);
  KITE_EXPECT_CLOSE(got, reference_attention(c, hb), kTolBF16);
  const Tensor k_cache = download(fused.k_cache);
  const int64_t row = c.kv_heads * c.dqk;
  for (int64_t s = 0; s < seqs; ++s) {  // the stored keys, against the CPU's
    const float* want = hb.k_cache.data<float>() + slots[s] * row;
    const float* have = k_cache.data<float>() + slots[s] * row;
    EXPECT_LE(
        rel_error(std::vector<double>(have, have + row), std::vector<double>(want, want + row)),
        1e-2)
        << "sequence " << s;
  }
}

int64_t pick(std::mt19937& rng, std::initializer_list<int64_t> values) {
  std::vector<int64_t> v(values);
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

// Head dims 64 and 128; GQA groups of 1 to 20 (20: two head blocks share the new key); the
// new key at a tile's first, last and middle rows, in the first tile (loaded after the wait)
// and in a later one (the first tile then goes out before it), in one split or the last of
// several; every block size the scheduler uses.
TEST(CudaAttentionRope, MatchesRopeThenAttentionBitForBit) {
  auto rng = test_rng();
  for (int64_t dim : {64, 128}) {
    for (int64_t group : {1, 4, 20}) {
      for (int splits : {0, 1, 3}) {
        AttnCase c{.name = "d" + std::to_string(dim) + " group " + std::to_string(group) +
                           " splits " + std::to_string(splits),
                   .dtype = DType::kBF16,
                   .seqs = {}};
        c.dqk = c.dv = dim;
        c.kv_heads = group >= 16 ? 1 : pick(rng, {2, 8});
        c.heads = c.kv_heads * group;
        c.block_size = pick(rng, {16, 32, 64});
        c.num_splits = splits;
        for (int64_t len : {1, 2, 64, 65, 129, 300}) c.seqs.push_back({len, 1});
        c.seqs.push_back({pick(rng, {63, 127, 1000}), 1});
        check(c, rng);
      }
    }
  }
}

TEST(CudaAttentionRope, RefusesWhatNoKernelCovers) {
  auto rng = test_rng();
  EXPECT_FALSE(decode_rope_covered(device_empty({1, 4, 192}, DType::kBF16),
                                   device_empty({2, 16, 1, 192}, DType::kBF16),
                                   device_empty({2, 16, 1, 128}, DType::kBF16)));
  EXPECT_FALSE(decode_rope_covered(device_empty({1, 4, 128}, DType::kBF16),
                                   device_empty({2, 16, 1, 128}, DType::kF8E4M3),
                                   device_empty({2, 16, 1, 128}, DType::kF8E4M3)));
  EXPECT_FALSE(decode_rope_covered(device_empty({1, 4, 128}, DType::kF32),
                                   device_empty({2, 16, 1, 128}, DType::kF32),
                                   device_empty({2, 16, 1, 128}, DType::kF32)));
  AttnCase c{.name = "f32", .dtype = DType::kF32, .seqs = {{5, 1}}};
  c.heads = c.kv_heads = 1;
  const HostBatch hb = make_host_batch(c, rng);
  DeviceBatch d = upload_batch(c, hb);
  Tensor k = device_empty({1, 1, 128}, DType::kBF16), v = device_empty({1, 1, 128}, DType::kBF16);
  Tensor cs = device_empty({1, 64}, DType::kF32);
  Tensor slots = device_empty({1}, DType::kI64);
  Tensor out = device_empty({1, 1, 128}, DType::kF32);
  AttentionWorkspace ws;
  const DecodeRope rope{&k, &v, &cs, &cs, &slots};
  EXPECT_THROW(
      paged_decode_attention(d.q, d.k_cache, d.v_cache, d.args, ws, out, test_stream(), &rope),
      std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
