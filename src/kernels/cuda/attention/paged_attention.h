// Paged attention on the GPU: split-K decode (flash-decoding) and causal prefill over a paged
// KV cache. Same function as ops::paged_attention (kernels/ops.h): scores = q·k * scale,
// causal, GQA (query head h reads kv head h / (num_heads / num_kv_heads)), softmax in fp32.
//
// Layouts (device tensors, q/caches/out one dtype, F32 or BF16 — or, with BF16 q and out, FP8
// E4M3 caches holding x / scale, read as code * args.k_scale / v_scale by the tensor-core
// kernels; a call no tensor-core kernel covers throws for FP8 caches):
//   q        [T, num_heads, head_dim_qk]
//   k_cache  [num_blocks, block_size, num_kv_heads, head_dim_qk]
//   v_cache  [num_blocks, block_size, num_kv_heads, head_dim_v], or the same tensor as
//            k_cache: then V is the first head_dim_v dims of each K row (MLA's latent cache,
//            576-wide rows whose first 512 dims are the value)
//   out      [T, num_heads, head_dim_v]
// (head_dim_qk, head_dim_v) must be one of kSupportedHeadDims (compile-time kernel variants).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "core/tensor.h"
#include "kernels/cuda/device_buffer.h"

namespace kite::cuda {

// (qk, v) pairs with a compiled kernel: Llama/Qwen (64, 128), DeepSeek MLA non-absorbed
// (192, 128), MLA absorbed (576, 512), kite-tiny's absorbed MLA (80, 64), and 256.
inline constexpr int kSupportedHeadDims[][2] = {{64, 64},   {128, 128}, {256, 256},
                                                {192, 128}, {576, 512}, {80, 64}};

// The batch, on the device. Sequence s owns query rows [query_start[s], query_start[s+1]) and
// its first seq_lens[s] cached tokens, found through block_tables[s]; its queries are the last
// tokens of those, so query i of q_len sees keys [0, seq_len - q_len + i].
struct PagedAttentionArgs {
  Tensor query_start;   // I32 [num_seqs + 1]; prefill only (decode has query s = sequence s)
  Tensor seq_lens;      // I32 [num_seqs]
  Tensor block_tables;  // I32 [num_seqs, max_blocks_per_seq]
  int64_t block_size = 16;
  float scale = 1.0f;
  // Host-side upper bounds, as the scheduler knows them. They size the grid only: a larger
  // value costs idle blocks, a smaller one costs speed (work loops stride past it), never
  // correctness.
  int64_t max_query_len = 1;  // prefill: longest query run
  int64_t max_seq_len = 1;    // decode: longest sequence (chooses the split count)
  int num_splits = 0;         // decode: key splits per sequence; 0 chooses from the device
  float k_scale = 1.0f, v_scale = 1.0f;  // FP8 caches: the value of code 1.0
};

// Scratch for split-K decode partial results: by default one buffer grown on demand (growing
// waits for the device); with an allocator (the backend's per-step arena) every call gets fresh
// step scratch instead, so a captured CUDA graph never points at a buffer a later step regrew.
class AttentionWorkspace {
 public:
  AttentionWorkspace() = default;
  explicit AttentionWorkspace(std::function<void*(size_t)> allocate)
      : allocate_(std::move(allocate)) {}
  void* reserve(size_t size_bytes) {
    if (allocate_) return allocate_(size_bytes);
    buffer_.reserve(size_bytes);
    return buffer_.data();
  }

 private:
  std::function<void*(size_t)> allocate_;
  DeviceBuffer buffer_;
};

// Whether a tensor-core kernel reads FP8 caches of this layout: separate K / V heads of
// (head_dim_qk, head_dim_v), or (shared) one latent cache of k_dims-wide rows (MLA: 576, its
// first 512 the value). Other FP8 layouts are refused by the calls above.
bool fp8_cache_covered(int64_t k_dims, int64_t v_dims, bool shared);

// The step's rope and cache write done by the decode attention itself (one launch fewer a
// layer): rope_and_cache(&q, 0, k, 0, &v, ...) over the whole head dim in the neox style, then
// the attention, the same bits as the two calls. q holds the step's queries unrotated (left so:
// the kernel rotates its own copy), k and v [T, num_kv_heads, head_dim] (contiguous BF16) the
// step's keys, unrotated, and values; each sequence's last key (position seq_len - 1) is its
// own, stored at slots[s] (skipped outside the cache, as write_cache does).
struct DecodeRope {
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
  const Tensor* cos = nullptr;    // F32 [T, head_dim / 2]
  const Tensor* sin = nullptr;    // F32 [T, head_dim / 2]
  const Tensor* slots = nullptr;  // I64 [T]
};
// Whether paged_decode_attention takes a DecodeRope for these tensors: BF16 q and caches (not
// FP8), separate K and V caches, head dims (64, 64) or (128, 128).
bool decode_rope_covered(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache);

// One query per sequence (T == num_seqs). Keys are split into chunks processed by separate
// blocks; a second kernel merges the partial softmax states. Only each sequence's last key may
// come from the kernel right before this call (the step's own token, from rope_and_cache): the
// kernels read the older keys, seq_lens and block_tables before that kernel has ended (PDL). Never
// reads a block id outside [0, num_blocks) or past max_blocks_per_seq: such a sequence's output is
// NaN.
// With `rope`, the step's rope and cache write too (DecodeRope; a call it does not cover
// throws).
void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const PagedAttentionArgs& args, AttentionWorkspace& workspace,
                            Tensor& out, cudaStream_t stream, const DecodeRope* rope = nullptr);

// Any batch (prefill, chunked prefill with a cached prefix, decode rows mixed in), causal,
// variable lengths in one launch. Rows of a sequence with more queries than keys are NaN.
// Absorbed MLA (576 / 512, one shared latent cache) runs on the MLA decode kernel with each
// prompt token as a sequence of its own; it takes scratch from `workspace` (null: a buffer of
// the calling thread's, grown on demand).
void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const PagedAttentionArgs& args, Tensor& out, cudaStream_t stream,
                             AttentionWorkspace* workspace = nullptr);

}  // namespace kite::cuda
