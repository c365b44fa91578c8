// Paged causal attention over a flattened batch (prefill, chunked prefill and decode alike).
//
// One work item is one query token and a block of the heads that share a kv head. It walks that
// sequence's block table, scoring every visible key against each head of the block (two-pass
// softmax: scores, then max-subtracted exp and the weighted sum of V), so its cost is
// O(visible_keys * heads * (head_dim_qk + head_dim_v)), reading each K/V row once for the block,
// and it needs a scratch row of scores per head of the block and thread. Items are spread over
// OpenMP threads dynamically because a causal batch mixes short and long rows.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "core/vec_math.h"
#include "kernels/cpu/attention_fp8.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

namespace kite::ops {
namespace {

constexpr const char* kOp = "paged_attention";

// Dimensions of one call, after validation.
struct AttentionDims {
  int64_t num_tokens, num_heads, num_kv_heads, head_dim_qk, head_dim_v;
  int64_t num_blocks, block_size;
};

AttentionDims check_tensors(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const PagedAttentionParams& p, const Tensor& out) {
  cpu::check_f32(q, kOp, "q");
  cpu::check_f32(k_cache, kOp, "k_cache");
  cpu::check_f32(v_cache, kOp, "v_cache");
  cpu::check_f32(out, kOp, "out");
  KITE_OP_CHECK(q.dim() == 3, kOp,
                "q must be [T, num_heads, head_dim_qk], got " + cpu::shape_of(q));
  KITE_OP_CHECK(k_cache.dim() == 4 && v_cache.dim() == 4, kOp,
                "caches must be [num_blocks, block_size, num_kv_heads, head_dim], got k " +
                    cpu::shape_of(k_cache) + ", v " + cpu::shape_of(v_cache));
  AttentionDims d{q.size(0),       q.size(1),       k_cache.size(2), q.size(2),
                  v_cache.size(3), k_cache.size(0), k_cache.size(1)};
  KITE_OP_CHECK(k_cache.size(3) == d.head_dim_qk, kOp,
                "k_cache head_dim " + std::to_string(k_cache.size(3)) + " != q head_dim " +
                    std::to_string(d.head_dim_qk));
  KITE_OP_CHECK(
      v_cache.size(0) == d.num_blocks && v_cache.size(1) == d.block_size &&
          v_cache.size(2) == d.num_kv_heads,
      kOp,
      "v_cache " + cpu::shape_of(v_cache) + " disagrees with k_cache " + cpu::shape_of(k_cache));
  KITE_OP_CHECK(p.block_size == d.block_size, kOp,
                "params.block_size " + std::to_string(p.block_size) + " != cache block size " +
                    std::to_string(d.block_size));
  KITE_OP_CHECK(d.num_kv_heads > 0 && d.num_heads % d.num_kv_heads == 0, kOp,
                std::to_string(d.num_heads) + " query heads are not a multiple of " +
                    std::to_string(d.num_kv_heads) + " kv heads");
  KITE_OP_CHECK(out.dim() == 3 && out.size(0) == d.num_tokens && out.size(1) == d.num_heads &&
                    out.size(2) == d.head_dim_v,
                kOp,
                "out " + cpu::shape_of(out) + " must be [" + std::to_string(d.num_tokens) + ", " +
                    std::to_string(d.num_heads) + ", " + std::to_string(d.head_dim_v) + "]");
  KITE_OP_CHECK(!cpu::overlaps(out, q), kOp, "out must not alias q");
  return d;
}

// Validates the batch description and returns, for each query token, its sequence index.
std::vector<int32_t> check_batch(const PagedAttentionParams& p, const AttentionDims& d) {
  KITE_OP_CHECK(p.block_tables != nullptr, kOp, "params.block_tables is null");
  const auto num_seqs = static_cast<int64_t>(p.seq_lens.size());
  KITE_OP_CHECK(static_cast<int64_t>(p.query_start.size()) == num_seqs + 1 &&
                    static_cast<int64_t>(p.block_tables->size()) == num_seqs,
                kOp,
                "query_start needs num_seqs + 1 entries and block_tables num_seqs lists (" +
                    std::to_string(num_seqs) + " sequences)");
  KITE_OP_CHECK(
      p.query_start[0] == 0 && p.query_start[num_seqs] == d.num_tokens, kOp,
      "query_start must run from 0 to the " + std::to_string(d.num_tokens) + " query tokens");
  std::vector<int32_t> token_seq(d.num_tokens);
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t begin = p.query_start[s], end = p.query_start[s + 1];
    const int64_t seq_len = p.seq_lens[s];
    const auto& table = (*p.block_tables)[s];
    KITE_OP_CHECK(begin <= end && end - begin <= seq_len, kOp,
                  "sequence " + std::to_string(s) + " has " + std::to_string(end - begin) +
                      " queries but only " + std::to_string(seq_len) + " tokens");
    KITE_OP_CHECK(static_cast<int64_t>(table.size()) * d.block_size >= seq_len, kOp,
                  "sequence " + std::to_string(s) + " has " + std::to_string(seq_len) +
                      " tokens but its block table covers " +
                      std::to_string(table.size() * d.block_size));
    const int64_t used_blocks = (seq_len + d.block_size - 1) / d.block_size;
    for (int64_t b = 0; b < used_blocks; ++b) {
      KITE_OP_CHECK(table[b] >= 0 && table[b] < d.num_blocks, kOp,
                    "sequence " + std::to_string(s) + " uses block " + std::to_string(table[b]) +
                        " outside the cache's " + std::to_string(d.num_blocks) + " blocks");
    }
    std::fill(token_seq.begin() + begin, token_seq.begin() + end, static_cast<int32_t>(s));
  }
  return token_seq;
}

// Walks keys [0, num_keys) of one sequence block by block: fn(j, row) gets key index j and
// a pointer to that key's row for `head_offset` within the cache laid out with `row_stride`.
template <typename Fn>
inline void for_each_cached_row(const float* cache, const std::vector<int32_t>& table,
                                int64_t num_keys, int64_t block_size, int64_t row_stride,
                                int64_t head_offset, Fn&& fn) {
  for (int64_t j0 = 0; j0 < num_keys; j0 += block_size) {
    const int64_t slot0 = static_cast<int64_t>(table[j0 / block_size]) * block_size;
    const int64_t n = std::min(block_size, num_keys - j0);
    const float* row = cache + slot0 * row_stride + head_offset;
    for (int64_t j = 0; j < n; ++j, row += row_stride) fn(j0 + j, row);
  }
}

// The value sums of a block of query heads that share one kv head: out_h[0, dim) = sum_j
// probs_h[j] * V_j for HB heads, in walks of the rows that each serve every head of the block, so
// the block reads each value row once (each head walking the rows alone read MLA's shared latent
// rows four times, from L2). Every output lane is the same FMA chain over j in key order as with
// one head, so the result does not depend on how heads are blocked (chunked prefill and decode
// split heads differently). probs_h = probs + h * probs_stride, out_h = out + h * out_stride.
struct HeadRows {
  const float* probs;
  int64_t probs_stride;
  float* out;
  int64_t out_stride;
};

#ifdef KITE_CPU_AVX2
// Lanes [c, c + 8 CW) of HB heads in one walk: HB x CW ymm accumulators held across all keys
// (arrays the unrolled loops index by constants only, so they stay in registers).
template <int HB, int CW>
void weighted_sum_walk(const HeadRows& r, int64_t h0, const float* v_cache,
                       const std::vector<int32_t>& table, int64_t num_keys, int64_t block_size,
                       int64_t row_stride, int64_t head_offset, int64_t c) {
  __m256 acc[HB][CW];
#pragma GCC unroll 8
  for (int h = 0; h < HB; ++h)
#pragma GCC unroll 8
    for (int i = 0; i < CW; ++i) acc[h][i] = _mm256_setzero_ps();
  const float* probs = r.probs + h0 * r.probs_stride;
  for_each_cached_row(v_cache, table, num_keys, block_size, row_stride, head_offset + c,
                      [&](int64_t j, const float* v) {
                        __m256 vv[CW];
#pragma GCC unroll 8
                        for (int i = 0; i < CW; ++i) vv[i] = _mm256_loadu_ps(v + 8 * i);
#pragma GCC unroll 8
                        for (int h = 0; h < HB; ++h) {
                          const __m256 w = _mm256_set1_ps(probs[h * r.probs_stride + j]);
#pragma GCC unroll 8
                          for (int i = 0; i < CW; ++i)
                            acc[h][i] = _mm256_fmadd_ps(w, vv[i], acc[h][i]);
                        }
                      });
#pragma GCC unroll 8
  for (int h = 0; h < HB; ++h)
#pragma GCC unroll 8
    for (int i = 0; i < CW; ++i)
      _mm256_storeu_ps(r.out + (h0 + h) * r.out_stride + c + 8 * i, acc[h][i]);
}

// weighted_sum_walk<HB, cw> for a run-time chunk count cw in [1, CW].
template <int HB, int CW>
void weighted_sum_walk_tail(int cw, const HeadRows& r, int64_t h0, const float* v_cache,
                            const std::vector<int32_t>& table, int64_t num_keys, int64_t block_size,
                            int64_t row_stride, int64_t head_offset, int64_t c) {
  if constexpr (CW > 0) {
    if (cw == CW)
      return weighted_sum_walk<HB, CW>(r, h0, v_cache, table, num_keys, block_size, row_stride,
                                       head_offset, c);
    weighted_sum_walk_tail<HB, CW - 1>(cw, r, h0, v_cache, table, num_keys, block_size, row_stride,
                                       head_offset, c);
  }
}

// The 8-float chunks [0, chunks) of HB heads: CW chunks a walk (HB x CW accumulators: 8 for
// four heads, as many as one head's widest walk), the leftover chunks in one more.
template <int HB>
void weighted_sum_chunks(const HeadRows& r, int64_t h0, int64_t chunks, const float* v_cache,
                         const std::vector<int32_t>& table, int64_t num_keys, int64_t block_size,
                         int64_t row_stride, int64_t head_offset) {
  constexpr int CW = 8 / HB;
  int64_t c = 0;
  for (; c + CW <= chunks; c += CW)
    weighted_sum_walk<HB, CW>(r, h0, v_cache, table, num_keys, block_size, row_stride, head_offset,
                              8 * c);
  if (c < chunks)
    weighted_sum_walk_tail<HB, CW>(static_cast<int>(chunks - c), r, h0, v_cache, table, num_keys,
                                   block_size, row_stride, head_offset, 8 * c);
}
#endif

// The value sums of heads [0, heads) of the block (HeadRows), dim floats each: blocks of four,
// two and one heads over the 8-float chunks, then the last dim % 8 floats a head and a lane at a
// time.
void weighted_sum_heads(const HeadRows& r, int64_t heads, const float* v_cache,
                        const std::vector<int32_t>& table, int64_t num_keys, int64_t block_size,
                        int64_t row_stride, int64_t head_offset, int64_t dim) {
  int64_t c = 0;
#ifdef KITE_CPU_AVX2
  const int64_t chunks = dim / 8;
  int64_t h = 0;
  for (; h + 4 <= heads; h += 4)
    weighted_sum_chunks<4>(r, h, chunks, v_cache, table, num_keys, block_size, row_stride,
                           head_offset);
  for (; h + 2 <= heads; h += 2)
    weighted_sum_chunks<2>(r, h, chunks, v_cache, table, num_keys, block_size, row_stride,
                           head_offset);
  for (; h < heads; ++h)
    weighted_sum_chunks<1>(r, h, chunks, v_cache, table, num_keys, block_size, row_stride,
                           head_offset);
  c = 8 * chunks;
#endif
  for (int64_t h = 0; h < heads; ++h) {
    const float* probs = r.probs + h * r.probs_stride;
    for (int64_t i = c; i < dim; ++i) {
      float acc = 0.0f;
      for_each_cached_row(v_cache, table, num_keys, block_size, row_stride, head_offset + i,
                          [&](int64_t j, const float* v) { acc += probs[j] * v[0]; });
      r.out[h * r.out_stride + i] = acc;
    }
  }
}

// Attention of `heads` consecutive query rows q (q_stride apart; heads sharing kv head
// `kv_head`) against keys [0, num_keys) of one sequence. `scores` has room for heads x
// num_keys floats and `sums` for heads doubles; head h's output goes to out + h * out_stride
// (head_dim_v floats). Each key row is scored against every head while it is in L1; the
// arithmetic per head is the same as with one head.
void attend_heads(const float* q, int64_t q_stride, int64_t heads, const float* k_cache,
                  const float* v_cache, const std::vector<int32_t>& table, int64_t num_keys,
                  int64_t kv_head, const AttentionDims& d, float scale, float* scores, double* sums,
                  float* out, int64_t out_stride) {
  const int64_t row_k = d.num_kv_heads * d.head_dim_qk;  // stride between slots in k_cache
  const int64_t row_v = d.num_kv_heads * d.head_dim_v;
  for_each_cached_row(k_cache, table, num_keys, d.block_size, row_k, kv_head * d.head_dim_qk,
                      [&](int64_t j, const float* k) {
                        for (int64_t h = 0; h < heads; ++h)
                          scores[h * num_keys + j] =
                              cpu::dot(q + h * q_stride, k, d.head_dim_qk) * scale;
                      });
  // A NaN or +inf score makes the head's output NaN, as exp(score - max) did: the polynomial exp
  // below would give a NaN argument a weight of about 1e-38 instead. Such a head's weights are
  // zeroed for the value walk its block shares, its sum marked NaN, its output NaN.
  for (int64_t h = 0; h < heads; ++h) {
    const std::span<float> row(scores + h * num_keys, static_cast<size_t>(num_keys));
    const vec::RowMax max = vec::row_max(row);
    if (max.has_nan_or_pos_inf) {
      std::fill(row.begin(), row.end(), 0.0f);
      sums[h] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    sums[h] = vec::exp_shifted_in_place(row, max.max);
  }
  weighted_sum_heads(HeadRows{scores, num_keys, out, out_stride}, heads, v_cache, table, num_keys,
                     d.block_size, row_v, kv_head * d.head_dim_v, d.head_dim_v);
  for (int64_t h = 0; h < heads; ++h) {
    float* o = out + h * out_stride;
    if (std::isnan(sums[h])) {
      std::fill(o, o + d.head_dim_v, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    const float inv = static_cast<float>(1.0 / sums[h]);
    for (int64_t i = 0; i < d.head_dim_v; ++i) o[i] *= inv;
  }
}

}  // namespace

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const PagedAttentionParams& params, Tensor& out) {
  if (k_cache.dtype() == DType::kF8E4M3 || v_cache.dtype() == DType::kF8E4M3)
    return cpu::paged_attention_fp8(q, k_cache, v_cache, params, out);
  const AttentionDims d = check_tensors(q, k_cache, v_cache, params, out);
  const std::vector<int32_t> token_seq = check_batch(params, d);
  if (d.num_tokens == 0 || d.num_heads == 0) return;
  const int64_t group = d.num_heads / d.num_kv_heads;
  const int64_t max_seq_len = *std::max_element(params.seq_lens.begin(), params.seq_lens.end());
  const float* qd = q.data<float>();
  const float* kd = k_cache.data<float>();
  const float* vd = v_cache.data<float>();
  float* od = out.data<float>();
  // A work item is a block of `chunk` query heads of one token that share a kv head: they go to
  // one thread together, which reads each K/V row once for all of them. The block shrinks when
  // it would leave threads idle (decode, MQA).
  int64_t chunk = group;
  while (chunk > 1 &&
         d.num_tokens * d.num_heads / chunk < 2 * static_cast<int64_t>(omp_get_max_threads()))
    chunk /= 2;
  if (group % chunk != 0) chunk = 1;  // blocks must not straddle two kv heads
  const int64_t blocks_per_token = d.num_heads / chunk;
  const int64_t items = d.num_tokens * blocks_per_token;
#pragma omp parallel if (d.num_tokens * d.num_heads * max_seq_len * d.head_dim_qk >= \
                         cpu::kParallelMinWork)
  {
    std::vector<float> scores(chunk * max_seq_len);
    std::vector<double> sums(chunk);
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t t = item / blocks_per_token;
      const int64_t h = (item % blocks_per_token) * chunk;
      const int32_t s = token_seq[t];
      const int64_t q_len = params.query_start[s + 1] - params.query_start[s];
      // Query i of a sequence is token seq_len - q_len + i and sees keys up to itself.
      const int64_t num_keys = params.seq_lens[s] - q_len + (t - params.query_start[s]) + 1;
      const int64_t row = t * d.num_heads + h;
      attend_heads(qd + row * d.head_dim_qk, d.head_dim_qk, chunk, kd, vd,
                   (*params.block_tables)[s], num_keys, h / group, d, params.scale, scores.data(),
                   sums.data(), od + row * d.head_dim_v, d.head_dim_v);
    }
  }
}

}  // namespace kite::ops
