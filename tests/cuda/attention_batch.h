// A random paged-attention batch for the CUDA attention tests and benchmarks: a host copy for
// ops::paged_attention (the reference) and a device copy for the kernels.
//
// Unused cache slots are NaN and block tables are padded with an id past the cache, so a
// kernel that reads a key it should not see, or a table entry past the sequence, yields NaN.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/attention/paged_attention.h"
#include "kernels/ops.h"

namespace kite::cuda::testing {

struct SeqSpec {
  int64_t seq_len, q_len;
};

struct AttnCase {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<SeqSpec> seqs;
  int64_t heads = 8, kv_heads = 8, dqk = 128, dv = 128, block_size = 16;
  bool shared_kv = false;  // MLA: V is the first dv dims of each K row (one cache tensor)
  float q_range = 1.0f;    // larger makes the softmax peaky
  float v_lo = -1.0f, v_hi = 1.0f;
  int num_splits = 0;  // decode: 0 = automatic
};

struct HostBatch {
  Tensor q, k_cache, v_cache;  // v_cache holds V separately even when shared_kv (CPU op)
  std::vector<int32_t> query_start{0}, seq_lens;
  std::vector<std::vector<int32_t>> tables;
  int64_t max_blocks = 1;
};

inline HostBatch make_host_batch(const AttnCase& c, std::mt19937& rng) {
  HostBatch b;
  int64_t blocks_needed = 0, tokens = 0;
  for (const SeqSpec& s : c.seqs) {
    const int64_t n = (s.seq_len + c.block_size - 1) / c.block_size;
    blocks_needed += n;
    b.max_blocks = std::max(b.max_blocks, n);
    tokens += s.q_len;
  }
  const int64_t num_blocks = blocks_needed + 3;  // spare blocks stay NaN
  const float nan = std::numeric_limits<float>::quiet_NaN();
  b.k_cache = Tensor::empty({num_blocks, c.block_size, c.kv_heads, c.dqk});
  b.v_cache = Tensor::empty({num_blocks, c.block_size, c.kv_heads, c.dv});
  std::fill(b.k_cache.f32().begin(), b.k_cache.f32().end(), nan);
  std::fill(b.v_cache.f32().begin(), b.v_cache.f32().end(), nan);
  std::vector<int32_t> free_blocks(num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  std::uniform_real_distribution<float> kdist(-1.0f, 1.0f), vdist(c.v_lo, c.v_hi);
  const int64_t row_k = c.kv_heads * c.dqk, row_v = c.kv_heads * c.dv;
  for (const SeqSpec& s : c.seqs) {
    std::vector<int32_t> table;
    for (int64_t i = 0; i < (s.seq_len + c.block_size - 1) / c.block_size; ++i) {
      table.push_back(free_blocks.back());
      free_blocks.pop_back();
    }
    for (int64_t j = 0; j < s.seq_len; ++j) {
      const int64_t slot = table[j / c.block_size] * c.block_size + j % c.block_size;
      float* k = b.k_cache.data<float>() + slot * row_k;
      float* v = b.v_cache.data<float>() + slot * row_v;
      for (int64_t h = 0; h < c.kv_heads; ++h) {
        for (int64_t d = 0; d < c.dqk; ++d)
          k[h * c.dqk + d] = (c.shared_kv && d < c.dv) ? vdist(rng) : kdist(rng);
        for (int64_t d = 0; d < c.dv; ++d)
          v[h * c.dv + d] = c.shared_kv ? k[h * c.dqk + d] : vdist(rng);
      }
    }
    b.tables.push_back(table);
    b.seq_lens.push_back(static_cast<int32_t>(s.seq_len));
    b.query_start.push_back(b.query_start.back() + static_cast<int32_t>(s.q_len));
  }
  b.q = random_host({tokens, c.heads, c.dqk}, rng, -c.q_range, c.q_range);
  // The GPU sees rounded inputs; the reference must see the same ones (NaN stays NaN).
  round_to(b.q, c.dtype);
  round_to(b.k_cache, c.dtype);
  round_to(b.v_cache, c.dtype);
  return b;
}

inline float attn_scale(const AttnCase& c) { return 1.0f / std::sqrt(static_cast<float>(c.dqk)); }

inline Tensor reference_attention(const AttnCase& c, const HostBatch& b) {
  ops::PagedAttentionParams p;
  p.query_start = b.query_start;
  p.seq_lens = b.seq_lens;
  p.block_tables = &b.tables;
  p.block_size = c.block_size;
  p.scale = attn_scale(c);
  Tensor out = Tensor::empty({b.q.size(0), c.heads, c.dv});
  ops::paged_attention(b.q, b.k_cache, b.v_cache, p, out);
  return out;
}

struct DeviceBatch {
  Tensor q, k_cache, v_cache;
  PagedAttentionArgs args;
};

inline DeviceBatch upload_batch(const AttnCase& c, const HostBatch& b) {
  DeviceBatch d;
  Stream& stream = test_stream();
  d.q = to_device(b.q, c.dtype, stream);
  d.k_cache = to_device(b.k_cache, c.dtype, stream);
  d.v_cache = c.shared_kv ? d.k_cache : to_device(b.v_cache, c.dtype, stream);
  const auto seqs = static_cast<int64_t>(b.seq_lens.size());
  // Padding past each table's used blocks: an id outside the cache, so reading it shows.
  std::vector<int32_t> tables(seqs * b.max_blocks, std::numeric_limits<int32_t>::max());
  for (int64_t s = 0; s < seqs; ++s)
    std::copy(b.tables[s].begin(), b.tables[s].end(), tables.begin() + s * b.max_blocks);
  d.args.block_tables = to_device(std::span<const int32_t>(tables), {seqs, b.max_blocks}, stream);
  d.args.seq_lens = to_device(std::span<const int32_t>(b.seq_lens), {seqs}, stream);
  d.args.query_start = to_device(std::span<const int32_t>(b.query_start), {seqs + 1}, stream);
  d.args.block_size = c.block_size;
  d.args.scale = attn_scale(c);
  d.args.num_splits = c.num_splits;
  d.args.max_seq_len = 1;
  d.args.max_query_len = 1;
  for (const SeqSpec& s : c.seqs) {
    d.args.max_seq_len = std::max(d.args.max_seq_len, s.seq_len);
    d.args.max_query_len = std::max(d.args.max_query_len, s.q_len);
  }
  return d;
}

}  // namespace kite::cuda::testing
