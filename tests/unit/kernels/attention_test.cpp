#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "kernel_test_util.h"
#include "kernels/ops.h"

namespace kite {
namespace {

using testing::all_close;
using testing::poisoned;
using testing::random_tensor;

struct SeqSpec {
  int64_t seq_len, q_len;
};

struct AttnCase {
  std::string name;
  std::vector<SeqSpec> seqs;
  int64_t num_heads, num_kv_heads, head_dim_qk, head_dim_v, block_size;
  float q_range = 2.0f;  // larger values make the softmax peaky, testing its stability
};
void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

// A batch laid out in a paged cache whose unused slots are NaN, through shuffled block tables.
struct Batch {
  Tensor q, k_cache, v_cache;
  std::vector<Tensor> keys, values;  // per sequence: [seq_len, kv_heads, dim]
  std::vector<int32_t> query_start{0}, seq_lens;
  std::vector<std::vector<int32_t>> block_tables;
};

Batch make_batch(const AttnCase& c, std::mt19937& rng) {
  Batch b;
  int64_t blocks_needed = 0, num_tokens = 0;
  for (const SeqSpec& s : c.seqs) {
    blocks_needed += (s.seq_len + c.block_size - 1) / c.block_size + 1;  // +1 unused spare
    num_tokens += s.q_len;
  }
  const int64_t num_blocks = blocks_needed + 3;
  b.k_cache = poisoned({num_blocks, c.block_size, c.num_kv_heads, c.head_dim_qk});
  b.v_cache = poisoned({num_blocks, c.block_size, c.num_kv_heads, c.head_dim_v});
  std::vector<int32_t> free_blocks(num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  const int64_t row_k = c.num_kv_heads * c.head_dim_qk, row_v = c.num_kv_heads * c.head_dim_v;
  for (const SeqSpec& s : c.seqs) {
    std::vector<int32_t> table;
    const int64_t n_blocks = (s.seq_len + c.block_size - 1) / c.block_size + 1;
    for (int64_t i = 0; i < n_blocks; ++i) {
      table.push_back(free_blocks.back());
      free_blocks.pop_back();
    }
    Tensor keys = random_tensor({s.seq_len, c.num_kv_heads, c.head_dim_qk}, rng);
    Tensor values = random_tensor({s.seq_len, c.num_kv_heads, c.head_dim_v}, rng);
    for (int64_t j = 0; j < s.seq_len; ++j) {
      const int64_t slot = table[j / c.block_size] * c.block_size + j % c.block_size;
      std::copy_n(keys.data<float>() + j * row_k, row_k, b.k_cache.data<float>() + slot * row_k);
      std::copy_n(values.data<float>() + j * row_v, row_v, b.v_cache.data<float>() + slot * row_v);
    }
    b.keys.push_back(keys);
    b.values.push_back(values);
    b.block_tables.push_back(table);
    b.seq_lens.push_back(static_cast<int32_t>(s.seq_len));
    b.query_start.push_back(b.query_start.back() + static_cast<int32_t>(s.q_len));
  }
  b.q = random_tensor({num_tokens, c.num_heads, c.head_dim_qk}, rng, -c.q_range, c.q_range);
  return b;
}

// Straight from the definition, in double: causal softmax(q·k * scale) · V with GQA.
std::vector<double> attention_ref(const AttnCase& c, const Batch& b, double scale) {
  const int64_t group = c.num_heads / c.num_kv_heads;
  std::vector<double> out(b.q.size(0) * c.num_heads * c.head_dim_v);
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const SeqSpec& spec = c.seqs[s];
    for (int64_t i = 0; i < spec.q_len; ++i) {
      const int64_t t = b.query_start[s] + i;
      const int64_t num_keys = spec.seq_len - spec.q_len + i + 1;
      for (int64_t h = 0; h < c.num_heads; ++h) {
        const int64_t kvh = h / group;
        const float* q = b.q.data<float>() + (t * c.num_heads + h) * c.head_dim_qk;
        std::vector<double> scores(num_keys);
        for (int64_t j = 0; j < num_keys; ++j) {
          const float* k = b.keys[s].data<float>() + (j * c.num_kv_heads + kvh) * c.head_dim_qk;
          double dot = 0;
          for (int64_t d = 0; d < c.head_dim_qk; ++d) dot += double(q[d]) * k[d];
          scores[j] = dot * scale;
        }
        const double max = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double& v : scores) sum += (v = std::exp(v - max));
        double* o = out.data() + (t * c.num_heads + h) * c.head_dim_v;
        for (int64_t j = 0; j < num_keys; ++j) {
          const float* v = b.values[s].data<float>() + (j * c.num_kv_heads + kvh) * c.head_dim_v;
          for (int64_t d = 0; d < c.head_dim_v; ++d) o[d] += scores[j] / sum * v[d];
        }
      }
    }
  }
  return out;
}

ops::PagedAttentionParams params_for(const Batch& b, int64_t block_size, float scale) {
  ops::PagedAttentionParams p;
  p.query_start = b.query_start;
  p.seq_lens = b.seq_lens;
  p.block_tables = &b.block_tables;
  p.block_size = block_size;
  p.scale = scale;
  return p;
}

class PagedAttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(PagedAttentionTest, MatchesNaiveReference) {
  const AttnCase& c = GetParam();
  std::mt19937 rng(61);
  const Batch b = make_batch(c, rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_qk));
  Tensor out = poisoned({b.q.size(0), c.num_heads, c.head_dim_v});
  ops::paged_attention(b.q, b.k_cache, b.v_cache, params_for(b, c.block_size, scale), out);
  EXPECT_TRUE(all_close(out.f32(), attention_ref(c, b, scale), 1e-5, 1e-6));
}

std::vector<AttnCase> attention_cases() {
  std::vector<AttnCase> cases;
  // Decode at block boundaries, with GQA ratios 1, 2 and 4.
  for (int64_t seq_len : {1, 15, 16, 17, 32, 33}) {
    for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{4, 4}, {4, 2}, {8, 2}}) {
      cases.push_back({"decode_len" + std::to_string(seq_len) + "_h" + std::to_string(heads) +
                           "_kv" + std::to_string(kv_heads),
                       {{seq_len, 1}},
                       heads,
                       kv_heads,
                       64,
                       64,
                       16});
    }
  }
  cases.push_back({"prefill17_gqa4", {{17, 17}}, 4, 1, 32, 32, 16});
  cases.push_back({"prefill32", {{32, 32}}, 2, 2, 64, 64, 16});
  // A scheduler-style batch: chunked prefill (seq_len > q_len), decode, fresh prefill, a
  // one-token sequence and one with no queries this step.
  cases.push_back(
      {"mixed_batch", {{40, 5}, {16, 1}, {17, 17}, {1, 1}, {33, 0}, {70, 3}}, 4, 2, 64, 64, 16});
  cases.push_back({"mla_dims", {{20, 20}, {35, 3}}, 4, 4, 192, 128, 16});
  // Value widths past 64 by whole 8-float chunks (MLA's latent rows: 64 + 16) and by 7 chunks
  // and 3 floats: each count of leftover chunks takes its own accumulator set.
  cases.push_back({"latent_rows", {{40, 40}, {9, 2}}, 4, 1, 80, 80, 16});
  cases.push_back({"v_dim_59", {{21, 7}}, 2, 1, 40, 59, 16});
  cases.push_back({"v_dim_27", {{12, 12}}, 2, 2, 24, 27, 8});
  cases.push_back({"odd_dims_block4", {{13, 6}, {9, 1}}, 3, 1, 17, 9, 4});
  cases.push_back({"block1", {{5, 5}, {3, 1}}, 2, 1, 8, 8, 1});
  cases.push_back({"peaky_softmax", {{48, 4}}, 2, 1, 64, 64, 16, 40.0f});
  // Seven heads a kv head (Qwen2.5-0.5B's 14 / 2): blocks of four, two and one heads share the
  // value walks, over 7 chunks and 3 floats.
  cases.push_back({"gqa7_v59", {{30, 30}, {12, 2}}, 14, 2, 64, 59, 16});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, PagedAttentionTest, ::testing::ValuesIn(attention_cases()),
                         [](const auto& info) { return info.param.name; });

// A NaN or an infinity in a query gives that query's head NaN outputs (as exp(score - max) of a
// NaN or +inf score would), not a tiny weight from the softmax's polynomial exp; the other heads
// stay finite. Queries 7 and 15 see 8 and 16 keys, all in the exp's 8-lane part.
TEST(PagedAttention, NanOrInfiniteQueryGivesNanOutput) {
  const AttnCase c{"nan", {{24, 24}}, 2, 1, 80, 80, 16};
  std::mt19937 rng(62);
  Batch b = make_batch(c, rng);
  float* q = b.q.data<float>();
  q[(15 * c.num_heads + 1) * c.head_dim_qk + 3] = std::nanf("");
  q[(7 * c.num_heads + 0) * c.head_dim_qk + 5] = std::numeric_limits<float>::infinity();
  Tensor out = poisoned({b.q.size(0), c.num_heads, c.head_dim_v});
  ops::paged_attention(b.q, b.k_cache, b.v_cache, params_for(b, c.block_size, 0.1f), out);
  for (const auto& [t, bad_head] : {std::pair<int64_t, int64_t>{15, 1}, {7, 0}})
    for (int64_t h = 0; h < c.num_heads; ++h)
      for (int64_t i = 0; i < c.head_dim_v; ++i)
        EXPECT_EQ(std::isnan(out.data<float>()[(t * c.num_heads + h) * c.head_dim_v + i]),
                  h == bad_head)
            << "token " << t << " head " << h << " dim " << i;
}

// The heads a kv head serves are blocked by how many work items a call has (a prefill blocks
// them all, a one-token call not at all): every token's output must be the same bit for bit
// either way, or chunked prefill and decode would drift from a whole prefill.
TEST(PagedAttention, HeadBlocksGiveTheOneHeadResults) {
  for (const AttnCase& c : {AttnCase{"latent", {{40, 40}}, 4, 1, 80, 80, 16},
                            AttnCase{"gqa7", {{33, 33}}, 14, 2, 64, 59, 16}}) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(63);
    const Batch b = make_batch(c, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_qk));
    const int64_t t = b.q.size(0), row = c.num_heads * c.head_dim_v;
    Tensor all = poisoned({t, c.num_heads, c.head_dim_v});
    ops::paged_attention(b.q, b.k_cache, b.v_cache, params_for(b, c.block_size, scale), all);
    for (int64_t i = 0; i < t; ++i) {
      Batch one = b;  // token i alone: a decode of the first i + 1 tokens
      one.q = Tensor::empty({1, c.num_heads, c.head_dim_qk});
      std::copy_n(b.q.data<float>() + i * c.num_heads * c.head_dim_qk, c.num_heads * c.head_dim_qk,
                  one.q.data<float>());
      one.seq_lens = {static_cast<int32_t>(i + 1)};
      one.query_start = {0, 1};
      Tensor out = poisoned({1, c.num_heads, c.head_dim_v});
      ops::paged_attention(one.q, one.k_cache, one.v_cache, params_for(one, c.block_size, scale),
                           out);
      for (int64_t e = 0; e < row; ++e)
        ASSERT_EQ(out.data<float>()[e], all.data<float>()[i * row + e]) << "token " << i;
    }
  }
}

TEST(PagedAttention, RejectsInconsistentBatches) {
  std::mt19937 rng(62);
  const AttnCase c{"", {{17, 2}}, 4, 2, 16, 16, 16};
  Batch b = make_batch(c, rng);
  Tensor out = Tensor::empty({2, 4, 16});
  auto run = [&](ops::PagedAttentionParams p) {
    ops::paged_attention(b.q, b.k_cache, b.v_cache, p, out);
  };
  EXPECT_NO_THROW(run(params_for(b, 16, 1.0f)));
  EXPECT_THROW(run(params_for(b, 8, 1.0f)), std::invalid_argument);  // block size mismatch

  Batch too_many_queries = b;
  too_many_queries.seq_lens = {1};
  EXPECT_THROW(run(params_for(too_many_queries, 16, 1.0f)), std::invalid_argument);

  Batch short_table = b;
  short_table.block_tables[0].resize(1);  // 16 slots for 17 tokens
  EXPECT_THROW(run(params_for(short_table, 16, 1.0f)), std::invalid_argument);

  Batch bad_block = b;
  bad_block.block_tables[0][1] = static_cast<int32_t>(b.k_cache.size(0));
  EXPECT_THROW(run(params_for(bad_block, 16, 1.0f)), std::invalid_argument);

  Batch bad_start = b;
  bad_start.query_start = {0, 1};  // covers 1 of the 2 query rows
  EXPECT_THROW(run(params_for(bad_start, 16, 1.0f)), std::invalid_argument);

  Tensor q_bad_heads = random_tensor({2, 3, 16}, rng);
  Tensor out3 = Tensor::empty({2, 3, 16});
  EXPECT_THROW(
      ops::paged_attention(q_bad_heads, b.k_cache, b.v_cache, params_for(b, 16, 1.0f), out3),
      std::invalid_argument);
}

}  // namespace
}  // namespace kite
