// Host-side plumbing shared by the decode and prefill launchers: validated dimensions and
// strides of one call, the kernel parameter block, and the head-dim dispatch.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/attention/paged_attention.h"

namespace kite::cuda::attention {

// Everything a kernel needs, as plain pointers and sizes (passed by value to the kernel).
struct KernelParams {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  void* out = nullptr;
  const int32_t* query_start = nullptr;  // prefill
  const int32_t* seq_lens = nullptr;
  const int32_t* block_tables = nullptr;
  // decode_mla only: query row r reads block_tables row row_seq[r] (prompt tokens run as one
  // virtual sequence each: try_prefill_mla); null = row r.
  const int32_t* row_seq = nullptr;
  float* part_acc = nullptr;  // decode with splits > 1: [S, H, splits, DV]
  float* part_ml = nullptr;   // [S, H, splits, 2]: max and sum
  int num_tokens = 0, num_seqs = 0, num_heads = 0, num_kv_heads = 0;
  int block_size = 0, num_blocks = 0, max_blocks_per_seq = 0;
  int num_splits = 1;
  int64_t keys_per_split = 0;
  int64_t k_slot_stride = 0, v_slot_stride = 0, k_head_stride = 0, v_head_stride = 0;
  float scale_log2 = 0.0f;  // scale * log2(e)
  int head_dim_qk = 0, head_dim_v = 0;
  bool bf16 = false;
  bool kv_fp8 = false;  // FP8 E4M3 caches (tensor-core kernels only), read as code * scale
  float k_scale = 1.0f, v_scale = 1.0f;
  // FP8 shared (MLA) cache only: each K row's last kv_bf16_tail values are BF16 (the rope key;
  // ops::write_cache's bf16_tail), so a row is head_dim_qk + kv_bf16_tail bytes. Only the MLA
  // kernel reads such rows; the others decline a call with a tail.
  int kv_bf16_tail = 0;
  // Decode (paged_decode_attention): each sequence's last key is the step's own, written by
  // the kernel before this launch, while its earlier keys and the metadata (seq_lens,
  // block_tables: the step's upload) come from before that kernel; so the tensor-core decode
  // kernels read them and load a first tile of only older keys before pdl_wait.
  bool decode_step = false;
  // Decode with the step's rope and cache write inside (paged_decode_attention's DecodeRope;
  // rope_k null: none). q holds the step's queries unrotated; rope_k / rope_v [T, kv_heads, D]
  // its keys (unrotated) and values; cos / sin [T, D / 2] (neox style, the whole head dim);
  // each sequence's last key is its own, stored at rope_slots[s] (skipped outside
  // [0, num_slots)).
  const void* rope_k = nullptr;  // BF16
  const void* rope_v = nullptr;
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
  const int64_t* rope_slots = nullptr;
  int64_t num_slots = 0;
};

// Head dims (qk, v) the tensor-core GQA kernels (decode_mma.cu, prefill_mma.cu) are built
// for, BF16 or FP8 caches alike; and the absorbed-MLA kernel's latent row (decode_mla.cu; its
// first kMlaDv dims are the value). fp8_cache_covered and the kernels' entry checks read these.
inline constexpr int kMmaHeadDims[][2] = {{128, 128}, {64, 64}, {192, 128}};
inline constexpr int kMlaDqk = 576, kMlaDv = 512;
inline bool mma_covers_head_dims(int64_t dqk, int64_t dv) {
  for (const auto& d : kMmaHeadDims)
    if (d[0] == dqk && d[1] == dv) return true;
  return false;
}

// Head dims the fused decode rope (KernelParams::rope_k, decode_mma.cu) is built for: BF16
// caches, qk == v, a rotary pair or value pair a thread.
inline bool decode_rope_dims(int64_t dqk, int64_t dv, bool kv_fp8) {
  return !kv_fp8 && dqk == dv && (dqk == 64 || dqk == 128);
}

// Checks one call (op = "paged_decode_attention" or "paged_prefill_attention") and fills the
// sizes and pointers of KernelParams (not the split fields).
KernelParams check_and_describe(const char* op, const Tensor& q, const Tensor& k_cache,
                                const Tensor& v_cache, const PagedAttentionArgs& args,
                                const Tensor& out, bool decode);

// Tensor-core kernels (BF16, some head dims; prefill_mma.cu, decode_mma.cu). Each launches and
// returns true when it covers the call, else returns false and launches nothing.
bool try_prefill_mma(const KernelParams& p, int64_t max_query_len, cudaStream_t stream);
// The decode entries choose the split count themselves (and fill p's split fields).
// try_decode_mla: absorbed MLA (576/512, one shared latent cache, one kv head).
bool try_decode_mla(KernelParams& p, const PagedAttentionArgs& args, AttentionWorkspace& workspace,
                    cudaStream_t stream);
bool try_decode_mma(KernelParams& p, const PagedAttentionArgs& args, AttentionWorkspace& workspace,
                    cudaStream_t stream);
// Absorbed-MLA prefill through the MLA decode kernel: prompt token i of a sequence becomes a
// virtual sequence of its own (its keys [0, seq_len - q_len + i]) sharing the real one's block
// table, so the tensor-core decode kernel serves prompts too (the CUDA-core prefill kernel
// was ~10 ms per layer at 2048 tokens). Same coverage test as try_decode_mla.
bool try_prefill_mla(const KernelParams& p, const PagedAttentionArgs& args,
                     AttentionWorkspace& workspace, cudaStream_t stream);

// With p.num_splits > 1, points p.part_acc and p.part_ml at room in `workspace` for the split
// partials of `rows` query rows (the layout KernelParams gives, which the combine reads).
void reserve_split_partials(KernelParams& p, int64_t rows, AttentionWorkspace& workspace);

// The fewest keys a decode split takes: `tile` (one key tile, so a short context at batch 1
// still spreads over many blocks) unless the environment variable `env` (an A/B switch) asks
// for more. Read once per variable by the caller (a static).
int64_t min_keys_per_split_from_env(const char* env, int64_t tile);

// The split-K merge of decode.cu (kernel 2), shared by the tensor-core decode.
void launch_decode_combine(const KernelParams& p, cudaStream_t stream);

}  // namespace kite::cuda::attention

// Expands CALL(DQK, DV) for the call's head dims (one branch per kSupportedHeadDims entry).
#define KITE_ATTENTION_DISPATCH(dqk, dv, CALL)                                            \
  do {                                                                                    \
    if ((dqk) == 64 && (dv) == 64) {                                                      \
      CALL(64, 64);                                                                       \
    } else if ((dqk) == 128 && (dv) == 128) {                                             \
      CALL(128, 128);                                                                     \
    } else if ((dqk) == 256 && (dv) == 256) {                                             \
      CALL(256, 256);                                                                     \
    } else if ((dqk) == 192 && (dv) == 128) {                                             \
      CALL(192, 128);                                                                     \
    } else if ((dqk) == 576 && (dv) == 512) {                                             \
      CALL(576, 512);                                                                     \
    } else if ((dqk) == 80 && (dv) == 64) {                                               \
      CALL(80, 64);                                                                       \
    } else {                                                                              \
      throw std::invalid_argument("paged attention: no kernel for head dims (" +          \
                                  std::to_string(dqk) + ", " + std::to_string(dv) + ")"); \
    }                                                                                     \
  } while (0)
