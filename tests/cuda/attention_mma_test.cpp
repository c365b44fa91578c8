// The BF16 tensor-core attention kernels (prefill_mma.cu, decode_mma.cu) against
// ops::paged_attention on random batches: tile edges (63/64/65 rows and keys), one token,
// cached prefixes, sequences with no queries, GQA groups of 1 to 32 heads (one and two head
// blocks), every block size the scheduler uses, and forced split counts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "attention_batch.h"
#include "kernels/cuda/attention/paged_attention.h"

namespace kite::cuda {
namespace {

using namespace testing;

// `shared`: decode with this workspace (what earlier calls left in it) instead of a fresh one.
void check(const AttnCase& c, bool decode, std::mt19937& rng,
           AttentionWorkspace* shared = nullptr) {
  SCOPED_TRACE(c.name);
  const HostBatch hb = make_host_batch(c, rng);
  const Tensor ref = reference_attention(c, hb);
  DeviceBatch d = upload_batch(c, hb);
  Tensor out = device_poisoned(ref.shape(), c.dtype);
  if (decode) {
    AttentionWorkspace own;
    AttentionWorkspace& workspace = shared ? *shared : own;
    paged_decode_attention(d.q, d.k_cache, d.v_cache, d.args, workspace, out, test_stream());
  } else {
    paged_prefill_attention(d.q, d.k_cache, d.v_cache, d.args, out, test_stream());
  }
  KITE_EXPECT_CLOSE(download(out), ref, kTolBF16);
}

struct Dims {
  int64_t dqk, dv;
};
constexpr Dims kMmaDims[] = {{64, 64}, {128, 128}, {192, 128}};

int64_t pick(std::mt19937& rng, std::initializer_list<int64_t> values) {
  std::vector<int64_t> v(values);
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

TEST(CudaAttentionMma, PrefillRandomBatches) {
  auto rng = test_rng();
  for (const Dims& dims : kMmaDims) {
    for (int trial = 0; trial < 4; ++trial) {
      AttnCase c{.name = "prefill d" + std::to_string(dims.dqk) + " trial " + std::to_string(trial),
                 .dtype = DType::kBF16,
                 .seqs = {}};
      c.dqk = dims.dqk;
      c.dv = dims.dv;
      c.kv_heads = pick(rng, {1, 2});
      c.heads = c.kv_heads * pick(rng, {1, 3, 4, 8});
      c.block_size = pick(rng, {16, 32, 64});
      c.q_range = trial == 3 ? 6.0f : 1.0f;  // one peaky softmax per head dim
      const int64_t seqs = pick(rng, {1, 2, 4});
      for (int64_t s = 0; s < seqs; ++s) {
        const int64_t q_len = pick(rng, {0, 1, 15, 63, 64, 65, 128, 129, 200});
        const int64_t prefix = pick(rng, {0, 0, 1, 64, 100});
        c.seqs.push_back({q_len + prefix, q_len});
      }
      if (c.seqs[0].q_len == 0) c.seqs[0] = {70, 70};  // at least one query in the batch
      check(c, false, rng);
    }
  }
}

TEST(CudaAttentionMma, PrefillLongPromptAndPrefix) {
  auto rng = test_rng();
  AttnCase c{.name = "2048 prompt + chunk after 1500", .dtype = DType::kBF16, .seqs = {}};
  c.heads = 4;
  c.kv_heads = 1;
  c.seqs = {{2048, 2048}, {1500 + 300, 300}};
  c.v_lo = 0.0f;  // keeps the output off zero so a missed key tile shows
  check(c, false, rng);
}

TEST(CudaAttentionMma, PrefillBadBlockIdPoisonsOnlyThatSequence) {
  auto rng = test_rng();
  AttnCase c{.name = "bad", .dtype = DType::kBF16, .seqs = {{100, 100}, {80, 80}}};
  c.heads = 4;
  c.kv_heads = 2;
  HostBatch hb = make_host_batch(c, rng);
  const Tensor ref = reference_attention(c, hb);
  hb.tables[0][2] = static_cast<int32_t>(hb.k_cache.size(0));  // past the cache
  DeviceBatch d = upload_batch(c, hb);
  Tensor out = device_poisoned(ref.shape(), c.dtype);
  paged_prefill_attention(d.q, d.k_cache, d.v_cache, d.args, out, test_stream());
  Tensor got = download(out);
  // Rows 64..99 of sequence 0 read the bad block (keys 32..47) and must be NaN (rows 32..63
  // too; rows 0..31 share their 64-row tile, which may be poisoned as a whole). Sequence 1
  // must be untouched.
  const int64_t row = c.heads * c.dv;
  EXPECT_TRUE(all_nan(got.data<float>() + 64 * row, 36 * row));
  EXPECT_LE(rel_error(got.slice_rows(100, 180), ref.slice_rows(100, 180)), kTolBF16);
}

TEST(CudaAttentionMma, DecodeRandomBatches) {
  auto rng = test_rng();
  for (const Dims& dims : kMmaDims) {
    for (int64_t group : {1, 4, 7, 16, 20, 32}) {
      AttnCase c{.name = "decode d" + std::to_string(dims.dqk) + " group " + std::to_string(group),
                 .dtype = DType::kBF16,
                 .seqs = {}};
      c.dqk = dims.dqk;
      c.dv = dims.dv;
      c.kv_heads = group >= 16 ? 1 : pick(rng, {1, 2, 8});
      c.heads = c.kv_heads * group;
      c.block_size = pick(rng, {16, 32, 64});
      c.num_splits = static_cast<int>(pick(rng, {0, 0, 1, 3}));
      const int64_t seqs = pick(rng, {1, 3, 5});
      for (int64_t s = 0; s < seqs; ++s)
        c.seqs.push_back({pick(rng, {1, 2, 63, 64, 65, 300, 1000}), 1});
      check(c, true, rng);
    }
  }
}

// Split K merged by the combine launch in both its forms (registers up to 32 splits, block-wide
// past that) on one workspace for every call, as the backend keeps one: whatever the grid (1 to
// 40 sequences, 1 to 8 kv heads, one and two head blocks) and the split count, a call must not
// depend on what the call before left in it.
TEST(CudaAttentionMma, DecodeSplitsMergeOnOneWorkspace) {
  auto rng = test_rng();
  AttentionWorkspace workspace;
  for (int splits : {2, 3, 8, 31, 32, 33, 0}) {
    for (int64_t group : {4, 20}) {
      for (int64_t seqs : {1, 40}) {
        AttnCase c{.name = "splits " + std::to_string(splits) + " group " + std::to_string(group) +
                           " seqs " + std::to_string(seqs),
                   .dtype = DType::kBF16,
                   .seqs = {}};
        c.kv_heads = group >= 16 ? 1 : 8;
        c.heads = c.kv_heads * group;
        c.block_size = 16;
        c.num_splits = splits;
        for (int64_t s = 0; s < seqs; ++s) c.seqs.push_back({pick(rng, {1, 65, 700, 2100}), 1});
        check(c, true, rng, &workspace);
        check(c, true, rng, &workspace);  // the same grid again, on what the first left
      }
    }
  }
}

TEST(CudaAttentionMma, DecodeMlaRandomBatches) {
  auto rng = test_rng();
  for (int64_t heads : {8, 16, 20, 32, 128}) {
    AttnCase c{.name = "mla heads " + std::to_string(heads), .dtype = DType::kBF16, .seqs = {}};
    c.heads = heads;
    c.kv_heads = 1;
    c.dqk = 576;
    c.dv = 512;
    c.shared_kv = true;
    c.block_size = pick(rng, {16, 64});
    c.num_splits = static_cast<int>(pick(rng, {0, 0, 1, 5}));
    c.q_range = heads == 20 ? 4.0f : 1.0f;
    const int64_t seqs = pick(rng, {1, 3, 4});
    for (int64_t s = 0; s < seqs; ++s) c.seqs.push_back({pick(rng, {1, 31, 32, 33, 300, 2000}), 1});
    check(c, true, rng);
  }
}

TEST(CudaAttentionMma, DecodeLongContext) {
  auto rng = test_rng();
  AttnCase c{.name = "decode 32k", .dtype = DType::kBF16, .seqs = {{32768, 1}, {5000, 1}, {7, 1}}};
  c.heads = 8;
  c.kv_heads = 2;
  c.v_lo = 0.0f;
  check(c, true, rng);
  c.q_range = 8.0f;
  c.v_lo = -1.0f;
  check(c, true, rng);
}

}  // namespace
}  // namespace kite::cuda
