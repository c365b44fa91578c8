// Paged decode (split-K) and prefill attention against ops::paged_attention.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "attention_batch.h"
#include "kernels/cuda/attention/paged_attention.h"

namespace kite::cuda {
namespace {

using namespace testing;

std::vector<SeqSpec> decode_seqs(std::initializer_list<int64_t> lens) {
  std::vector<SeqSpec> seqs;
  for (int64_t len : lens) seqs.push_back({len, 1});
  return seqs;
}

void run_and_check(const AttnCase& c, bool decode) {
  auto rng = test_rng();
  const HostBatch hb = make_host_batch(c, rng);
  const Tensor ref = reference_attention(c, hb);
  DeviceBatch d = upload_batch(c, hb);
  Tensor out = device_poisoned(ref.shape(), c.dtype);
  if (decode) {
    AttentionWorkspace workspace;
    paged_decode_attention(d.q, d.k_cache, d.v_cache, d.args, workspace, out, test_stream());
  } else {
    paged_prefill_attention(d.q, d.k_cache, d.v_cache, d.args, out, test_stream());
  }
  KITE_EXPECT_CLOSE(download(out), ref, tolerance(c.dtype));
}

// Every decode case runs in both dtypes, through the decode kernel and through prefill (which
// takes any batch, one-query rows included).
std::vector<AttnCase> decode_cases() {
  std::vector<AttnCase> base = {
      {.name = "one_token", .seqs = decode_seqs({1})},
      {.name = "block_edges_gqa4",
       .seqs = decode_seqs({15, 16, 17, 32, 48}),
       .heads = 32,
       .kv_heads = 8},
      {.name = "mixed_gqa7",
       .seqs = decode_seqs({1, 17, 100, 515, 1000}),
       .heads = 28,
       .kv_heads = 4},
      {.name = "d64_block32",
       .seqs = decode_seqs({3, 64, 65, 300}),
       .heads = 16,
       .kv_heads = 2,
       .dqk = 64,
       .dv = 64,
       .block_size = 32},
      {.name = "d256",
       .seqs = decode_seqs({33, 200}),
       .heads = 4,
       .kv_heads = 2,
       .dqk = 256,
       .dv = 256},
      {.name = "mla_nonabsorbed_192_128",
       .seqs = decode_seqs({7, 130}),
       .heads = 8,
       .kv_heads = 8,
       .dqk = 192,
       .dv = 128},
      {.name = "mla_absorbed_576_512",
       .seqs = decode_seqs({1, 77, 300}),
       .heads = 16,
       .kv_heads = 1,
       .dqk = 576,
       .dv = 512,
       .block_size = 64,
       .shared_kv = true},
      {.name = "kite_tiny_80_64",
       .seqs = decode_seqs({5, 40}),
       .heads = 4,
       .kv_heads = 1,
       .dqk = 80,
       .dv = 64,
       .shared_kv = true},
      {.name = "peaky", .seqs = decode_seqs({48, 333}), .heads = 4, .kv_heads = 1, .q_range = 8.0f},
      {.name = "one_split",
       .seqs = decode_seqs({700, 20}),
       .heads = 8,
       .kv_heads = 2,
       .num_splits = 1},
      {.name = "seven_splits",
       .seqs = decode_seqs({700, 20, 111}),
       .heads = 8,
       .kv_heads = 2,
       .num_splits = 7},
  };
  std::vector<AttnCase> cases;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (AttnCase c : base) {
      c.dtype = dtype;
      c.name += "_" + dtype_label(dtype);
      cases.push_back(c);
    }
  }
  return cases;
}

class CudaDecodeAttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(CudaDecodeAttentionTest, SplitKMatchesCpu) { run_and_check(GetParam(), true); }
TEST_P(CudaDecodeAttentionTest, PrefillKernelMatchesCpu) { run_and_check(GetParam(), false); }

INSTANTIATE_TEST_SUITE_P(Cases, CudaDecodeAttentionTest, ::testing::ValuesIn(decode_cases()),
                         [](const auto& info) { return info.param.name; });

std::vector<AttnCase> prefill_cases() {
  std::vector<AttnCase> base = {
      {.name = "single_token", .seqs = {{1, 1}}},
      {.name = "prompts_gqa4",
       .seqs = {{37, 37}, {64, 64}, {129, 129}},
       .heads = 16,
       .kv_heads = 4},
      // Chunked prefill over a cached prefix, a decode row, a block-exact chunk, a sequence
      // with no queries this step, a fresh prompt.
      {.name = "scheduler_mix",
       .seqs = {{300, 50}, {16, 1}, {32, 16}, {40, 0}, {70, 70}},
       .heads = 8,
       .kv_heads = 2},
      {.name = "d64_block32",
       .seqs = {{65, 65}, {100, 3}},
       .heads = 4,
       .kv_heads = 4,
       .dqk = 64,
       .dv = 64,
       .block_size = 32},
      {.name = "mla_nonabsorbed_192_128",
       .seqs = {{50, 50}, {90, 20}},
       .heads = 8,
       .kv_heads = 8,
       .dqk = 192,
       .dv = 128},
      {.name = "mla_absorbed_576_512",
       .seqs = {{100, 20}, {50, 1}, {64, 64}},
       .heads = 16,
       .kv_heads = 1,
       .dqk = 576,
       .dv = 512,
       .block_size = 64,
       .shared_kv = true},
      // MLA prefill runs on the MLA decode kernel, one virtual sequence per prompt token:
      // a long chunk over a prefix (several key tiles and splits per token), a decode row, a
      // sequence with no queries, a fresh prompt; 32 heads = two 16-head blocks.
      {.name = "mla_absorbed_mix",
       .seqs = {{600, 300}, {16, 1}, {40, 0}, {200, 200}},
       .heads = 32,
       .kv_heads = 1,
       .dqk = 576,
       .dv = 512,
       .block_size = 64,
       .shared_kv = true},
      // Many short prompts (1-9 tokens) over prefixes of other lengths in one launch, a decode
      // row among them; then prompts with their keys forced into 3 splits (tokens of one prompt
      // whose keys end in different splits).
      {.name = "mla_short_prompts",
       .seqs = {{7, 7}, {130, 5}, {3, 3}, {66, 6}, {2, 2}, {9, 9}, {200, 1}},
       .heads = 16,
       .kv_heads = 1,
       .dqk = 576,
       .dv = 512,
       .block_size = 16,
       .shared_kv = true},
      {.name = "mla_prompt_splits",
       .seqs = {{7, 7}, {130, 5}, {300, 41}},
       .heads = 16,
       .kv_heads = 1,
       .dqk = 576,
       .dv = 512,
       .block_size = 16,
       .shared_kv = true,
       .num_splits = 3},
      {.name = "kite_tiny_80_64",
       .seqs = {{33, 33}, {20, 4}},
       .heads = 4,
       .kv_heads = 1,
       .dqk = 80,
       .dv = 64,
       .shared_kv = true},
      {.name = "peaky", .seqs = {{80, 40}}, .heads = 4, .kv_heads = 2, .q_range = 8.0f},
  };
  std::vector<AttnCase> cases;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (AttnCase c : base) {
      c.dtype = dtype;
      c.name += "_" + dtype_label(dtype);
      cases.push_back(c);
    }
  }
  return cases;
}

class CudaPrefillAttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(CudaPrefillAttentionTest, MatchesCpu) { run_and_check(GetParam(), false); }

INSTANTIATE_TEST_SUITE_P(Cases, CudaPrefillAttentionTest, ::testing::ValuesIn(prefill_cases()),
                         [](const auto& info) { return info.param.name; });

// Long contexts: values in [0, 1] keep the output away from zero so fp32 summation error stays
// far below 1e-5 while a missed block of keys still moves it by more than that.
TEST(CudaAttentionLong, Decode8kAnd32kKeys) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    AttnCase c{.name = "long",
               .dtype = dtype,
               .seqs = decode_seqs({8192, 32768, 5}),
               .heads = 8,
               .kv_heads = 1,
               .v_lo = 0.0f,
               .v_hi = 1.0f};
    SCOPED_TRACE(dtype_label(dtype));
    run_and_check(c, true);
    c.q_range = 8.0f;  // peaky over a long context
    c.v_lo = -1.0f;
    run_and_check(c, true);
  }
}

TEST(CudaAttentionLong, PrefillChunkAfter8kPrefix) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    AttnCase c{.name = "long",
               .dtype = dtype,
               .seqs = {{8192 + 16, 16}, {4096, 1}},
               .heads = 8,
               .kv_heads = 2,
               .v_lo = 0.0f,
               .v_hi = 1.0f};
    SCOPED_TRACE(dtype_label(dtype));
    run_and_check(c, false);
  }
}

TEST(CudaAttention, UnderstatedMaxLengthsStayCorrect) {
  // The host bounds size the grid only; the kernels stride past them.
  AttnCase c{.name = "understated", .seqs = {{200, 200}, {900, 1}}, .heads = 4, .kv_heads = 2};
  auto rng = test_rng();
  const HostBatch hb = make_host_batch(c, rng);
  const Tensor ref = reference_attention(c, hb);
  DeviceBatch d = upload_batch(c, hb);
  d.args.max_query_len = 1;
  d.args.max_seq_len = 16;
  Tensor out = device_poisoned(ref.shape(), c.dtype);
  paged_prefill_attention(d.q, d.k_cache, d.v_cache, d.args, out, test_stream());
  KITE_EXPECT_CLOSE(download(out), ref, kTolF32);

  AttnCase dc{
      .name = "understated_decode", .seqs = decode_seqs({900, 3000}), .heads = 4, .kv_heads = 2};
  const HostBatch hd = make_host_batch(dc, rng);
  const Tensor dref = reference_attention(dc, hd);
  DeviceBatch dd = upload_batch(dc, hd);
  dd.args.max_seq_len = 100;
  Tensor dout = device_poisoned(dref.shape(), dc.dtype);
  AttentionWorkspace ws;
  paged_decode_attention(dd.q, dd.k_cache, dd.v_cache, dd.args, ws, dout, test_stream());
  KITE_EXPECT_CLOSE(download(dout), dref, kTolF32);
}

TEST(CudaAttention, BadBlockIdGivesNanForThatSequenceOnly) {
  AttnCase c{.name = "bad", .seqs = decode_seqs({40, 40}), .heads = 2, .kv_heads = 1};
  auto rng = test_rng();
  HostBatch hb = make_host_batch(c, rng);
  const Tensor ref = reference_attention(c, hb);
  hb.tables[0][1] = static_cast<int32_t>(hb.k_cache.size(0));  // past the cache
  DeviceBatch d = upload_batch(c, hb);
  for (int splits : {1, 3}) {
    d.args.num_splits = splits;
    Tensor out = device_poisoned(ref.shape(), c.dtype);
    AttentionWorkspace ws;
    paged_decode_attention(d.q, d.k_cache, d.v_cache, d.args, ws, out, test_stream());
    Tensor got = download(out);
    const int64_t row = c.heads * c.dv;
    EXPECT_TRUE(all_nan(got.data<float>(), row)) << splits << " splits";
    EXPECT_LE(rel_error(got.slice_rows(1, 2), ref.slice_rows(1, 2)), kTolF32);
  }
}

TEST(CudaAttention, RejectsBadShapes) {
  AttnCase c{.name = "shapes", .seqs = decode_seqs({17}), .heads = 4, .kv_heads = 2};
  auto rng = test_rng();
  const HostBatch hb = make_host_batch(c, rng);
  DeviceBatch d = upload_batch(c, hb);
  AttentionWorkspace ws;
  Tensor out = device_empty({1, 4, 128}, DType::kF32);
  PagedAttentionArgs wrong_block = d.args;
  wrong_block.block_size = 8;
  EXPECT_THROW(
      paged_decode_attention(d.q, d.k_cache, d.v_cache, wrong_block, ws, out, test_stream()),
      std::invalid_argument);
  Tensor out_bad = device_empty({1, 4, 96}, DType::kF32);  // (128, 96) has no kernel
  EXPECT_THROW(paged_prefill_attention(d.q, d.k_cache, d.v_cache, d.args, out_bad, test_stream()),
               std::invalid_argument);
  Tensor q3 = device_empty({1, 3, 128}, DType::kF32);  // 3 heads over 2 kv heads
  Tensor out3 = device_empty({1, 3, 128}, DType::kF32);
  EXPECT_THROW(paged_prefill_attention(q3, d.k_cache, d.v_cache, d.args, out3, test_stream()),
               std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
