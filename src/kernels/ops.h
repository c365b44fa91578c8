// The op interface: one entry point per op the four architectures need.
//
// Every op here has a CPU implementation (kernels/cpu/) in fp32; the CUDA backend implements
// the same signatures for device tensors and is tested against these. Ops do not validate
// user input (loaders and the scheduler do that) but check shapes and throw
// std::invalid_argument on a programming error, so a bug never reads out of bounds.
//
// Layout conventions (row-major, contiguous):
//   activations  [num_tokens, features]   (a flattened batch: tokens of all sequences)
//   linear W     [out_features, in_features] (as in Hugging Face checkpoints)
//   paged cache  [num_blocks, block_size, num_kv_heads, head_dim]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace kite::ops {

// y[M,N] = x[M,K] · W[N,K]^T (+ bias[N]). `y` must be preallocated [M,N].
void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y);

// out[i] = x[i] / rms(x[i]) * weight   over the last dim. out may alias x.
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);

// residual += x; out = rms_norm(residual). The fused pre-norm step between sublayers.
void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                  Tensor& out);

// out[t] = table[ids[t]]  (table [vocab, hidden]). Throws on an id outside the table.
void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out);

// out = silu(gate_up[:, :I]) * gate_up[:, I:] where gate_up is [T, 2I] and out [T, I].
void silu_mul(const Tensor& gate_up, Tensor& out);

enum class RopeStyle {
  kNeox,        // rotate_half over (first half, second half) of the rotary dims
  kInterleaved  // pairs (x0,x1), (x2,x3), ... — DeepSeek's layout
};

// Applies rotary embedding in place to x [T, num_heads, head_dim], rotating dims
// [rot_offset, rot_offset + rot_dim). cos/sin are [T, rot_dim/2] for each token's position
// (already multiplied by the variant's attention scaling).
void rope(Tensor& x, int64_t rot_offset, int64_t rot_dim, const Tensor& cos, const Tensor& sin,
          RopeStyle style);

// Where each new token's K/V go: slot = block_id * block_size + offset_in_block.
// Writes rows of `src` [T, width] into `cache` viewed as [num_slots, width].
void write_cache(const Tensor& src, std::span<const int64_t> slot_mapping, Tensor& cache);

// Paged causal attention for a flattened batch.
//   q           [T, num_heads, head_dim_qk]
//   k_cache     [num_blocks, block_size, num_kv_heads, head_dim_qk]
//   v_cache     [num_blocks, block_size, num_kv_heads, head_dim_v]
//   out         [T, num_heads, head_dim_v]
// Sequence s owns query rows [query_start[s], query_start[s+1]); its keys are its first
// seq_lens[s] cached tokens (found through block_tables[s]); the queries are the last
// (query_start[s+1]-query_start[s]) of them, so query i sees keys [0, seq_len - q_len + i].
struct PagedAttentionParams {
  std::span<const int32_t> query_start;          // num_seqs + 1
  std::span<const int32_t> seq_lens;             // num_seqs
  const std::vector<std::vector<int32_t>>* block_tables = nullptr;  // num_seqs lists
  int64_t block_size = 16;
  float scale = 1.0f;
};
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const PagedAttentionParams& params, Tensor& out);

// Row-wise softmax over the last dim, in place.
void softmax(Tensor& x);

// MoE router: from router logits [T, E] choose top_k experts per token.
enum class MoeScoring { kSoftmax, kSigmoid };
enum class MoeTopkMethod { kGreedy, kGroupLimitedGreedy, kNoauxTc };
struct MoeRoutingParams {
  MoeScoring scoring = MoeScoring::kSoftmax;
  MoeTopkMethod method = MoeTopkMethod::kGreedy;
  int64_t top_k = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = false;
  float routed_scaling_factor = 1.0f;
  const Tensor* correction_bias = nullptr;  // [E], noaux_tc only
};
// Outputs expert ids [T, top_k] and weights [T, top_k] (scaled, normalised as configured).
void moe_route(const Tensor& router_logits, const MoeRoutingParams& params,
               std::vector<int32_t>& expert_ids, std::vector<float>& expert_weights);

}  // namespace kite::ops
