// Causal paged attention for any batch: prefill, chunked prefill over a cached prefix, and
// decode rows, with variable lengths in one launch.
//
// Block (head h, tile t, sequence s) has four warps for query rows 4t .. 4t+3 of sequence s;
// each warp walks its row's visible keys [0, seq_len - q_len + row] four at a time with an
// online softmax (attention_common.cuh). The four warps read nearly the same keys, so their K
// and V rows mostly come from L1. Tiles past gridDim.y are taken in a strided loop, so a
// max_query_len below the real one costs speed, not rows.
//
// This is the simple CUDA-core form, used for F32 and the head dims prefill_mma.cu (the
// tensor-core kernel for BF16) does not cover.
#include <algorithm>

#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_launch.h"
#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {
namespace {

using attention::KernelParams;
constexpr int kWarps = 4;

template <typename T, int DQK, int DV>
__global__ void __launch_bounds__(kWarps * 32) prefill_kernel(const KernelParams p) {
  using namespace attention;
  using SQ = HeadSplit<T, DQK>;
  const int head = blockIdx.x, seq = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int64_t q_begin = p.query_start[seq];
  const int64_t q_len = p.query_start[seq + 1] - q_begin;
  const int64_t seq_len = p.seq_lens[seq];
  const bool bad =
      seq_len < 0 || q_len > seq_len || seq_len > int64_t{p.max_blocks_per_seq} * p.block_size;
  const KvCursor kv{p.block_tables + int64_t{seq} * p.max_blocks_per_seq,
                    p.block_size,
                    p.num_blocks,
                    p.k_slot_stride,
                    p.v_slot_stride,
                    kv_head * p.k_head_stride,
                    kv_head * p.v_head_stride};

  for (int64_t tile = blockIdx.y; tile * kWarps < q_len; tile += gridDim.y) {
    const int64_t row = tile * kWarps + warp;
    const int64_t token = q_begin + row;
    // Warp-uniform; the loop body has no block-wide barrier.
    if (row >= q_len || token < 0 || token >= p.num_tokens) continue;
    float q[SQ::kIters][SQ::kVec];
    load_row<T, DQK>(static_cast<const T*>(p.q) + (token * p.num_heads + head) * DQK, lane, q);
#pragma unroll
    for (int it = 0; it < SQ::kIters; ++it)
#pragma unroll
      for (int j = 0; j < SQ::kVec; ++j) q[it][j] *= p.scale_log2;
    SoftmaxState<T, DV> st;
    st.bad = bad;
    const int64_t visible = bad ? 0 : seq_len - q_len + row + 1;
    attend_keys<T, DQK, DV>(st, q, static_cast<const T*>(p.k_cache),
                            static_cast<const T*>(p.v_cache), kv, 0, visible, kKeysPerStep, lane);
    store_normalised<T, DV>(st, static_cast<T*>(p.out) + (token * p.num_heads + head) * DV, lane);
  }
}

template <typename T, int DQK, int DV>
void run_prefill(const KernelParams& p, int64_t max_query_len, cudaStream_t stream) {
  const int64_t tiles = (std::max<int64_t>(max_query_len, 1) + kWarps - 1) / kWarps;
  const dim3 grid(p.num_heads, static_cast<unsigned>(std::min<int64_t>(tiles, 65535)), p.num_seqs);
  prefill_kernel<T, DQK, DV><<<grid, kWarps * 32, 0, stream>>>(p);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const PagedAttentionArgs& args, Tensor& out, cudaStream_t stream,
                             AttentionWorkspace* workspace) {
  const KernelParams p = attention::check_and_describe("paged_prefill_attention", q, k_cache,
                                                       v_cache, args, out, /*decode=*/false);
  if (p.num_seqs == 0 || p.num_heads == 0 || p.num_tokens == 0) return;
  static thread_local AttentionWorkspace own;
  if (attention::try_prefill_mla(p, args, workspace ? *workspace : own, stream)) return;
  if (attention::try_prefill_mma(p, args.max_query_len, stream)) return;
  KITE_CUDA_OP_CHECK(!p.kv_fp8, "paged_prefill_attention",
                     "FP8 caches need a tensor-core prefill kernel for head dims (" +
                         std::to_string(p.head_dim_qk) + ", " + std::to_string(p.head_dim_v) + ")");
#define KITE_RUN_PREFILL(DQK, DV)                               \
  if (p.bf16) {                                                 \
    run_prefill<bf16, DQK, DV>(p, args.max_query_len, stream);  \
  } else {                                                      \
    run_prefill<float, DQK, DV>(p, args.max_query_len, stream); \
  }
  KITE_ATTENTION_DISPATCH(p.head_dim_qk, p.head_dim_v, KITE_RUN_PREFILL);
#undef KITE_RUN_PREFILL
}

}  // namespace kite::cuda
