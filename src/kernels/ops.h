// The op interface: one entry point per op the four architectures need.
//
// Every op here has a CPU implementation (kernels/cpu/) in fp32; the CUDA backend implements
// the same signatures for device tensors and is tested against these. Ops do not validate
// user input (loaders and the scheduler do that) but check shapes, dtypes (F32 only on the
// CPU), slots and block ids, and throw std::invalid_argument on a programming error, so a bug
// never reads out of bounds. Exception: embedding throws std::out_of_range on a bad token id.
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

// y[M,N] = x[M,K] · W[N,K]^T (+ bias[N]). `y` must be preallocated [M,N] and must not alias
// x or W. x and y may have extra leading dims ([B, S, K] -> [B, S, N]).
void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y);

// out[i] = x[i] / rms(x[i]) * weight   over the last dim. out may alias x.
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);

// residual += x; out = rms_norm(residual). The fused pre-norm step between sublayers.
// out may alias x (not residual: residual must keep the sum).
void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                  Tensor& out);

// out[t] = table[ids[t]]  (table [vocab, hidden]). Throws on an id outside the table.
void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out);

// out = silu(gate_up[:, :I]) * gate_up[:, I:] where gate_up is [T, 2I] and out [T, I].
// out may be a view of gate_up's first T*I floats (computed in place), or separate memory.
void silu_mul(const Tensor& gate_up, Tensor& out);

// With h = rot_dim/2 and (c_i, s_i) = cos/sin of pair i, over the rotary dims:
enum class RopeStyle {
  // Pairs (x[i], x[i+h]):  out[i] = x[i]*c_i - x[i+h]*s_i;  out[i+h] = x[i+h]*c_i + x[i]*s_i.
  kNeox,
  // Pairs (x[2i], x[2i+1]), written in the half-split layout:
  //   out[i] = x[2i]*c_i - x[2i+1]*s_i;  out[i+h] = x[2i+1]*c_i + x[2i]*s_i.
  // This is transformers' apply_rotary_pos_emb_interleave (DeepSeek-V3). DeepSeek-V2's complex
  // form leaves the pairs interleaved instead; the two differ by one fixed permutation of the
  // rotary dims, applied to q and k alike, so q·k and hence attention are identical. Apply the
  // same style to q and k (and cache k after rope) and either model is matched.
  kInterleaved
};

// Applies rotary embedding in place to x [T, num_heads, head_dim], rotating dims
// [rot_offset, rot_offset + rot_dim) and leaving the others untouched. cos/sin are
// [T, rot_dim/2] for each token's position (already multiplied by the variant's attention
// scaling); rot_dim must be even.
void rope(Tensor& x, int64_t rot_offset, int64_t rot_dim, const Tensor& cos, const Tensor& sin,
          RopeStyle style);

// Where each new token's K/V go: slot = block_id * block_size + offset_in_block.
// Writes rows of `src` [T, width] (or [T, num_kv_heads, head_dim]) into `cache`
// [num_blocks, block_size, ...] viewed as [num_slots, width]; each slot must be in range.
// An F8_E4M3 cache stores fp8(src / scale) (saturating); an F32 cache ignores `scale`. With
// bf16_tail = n (F8_E4M3 only; KvCacheSpec::fp8_bf16_tail, MLA's rope key) src's last n values
// are stored as BF16 (unscaled, round to nearest even, two bytes each, little-endian) after the
// first width - n as FP8, so a cache row is width + n elements; paged_attention reads them back.
void write_cache(const Tensor& src, std::span<const int64_t> slot_mapping, Tensor& cache,
                 float scale = 1.0f, int64_t bf16_tail = 0);

// Paged causal attention for a flattened batch.
//   q           [T, num_heads, head_dim_qk]
//   k_cache     [num_blocks, block_size, num_kv_heads, head_dim_qk]
//   v_cache     [num_blocks, block_size, num_kv_heads, head_dim_v]
//   out         [T, num_heads, head_dim_v]
// Sequence s owns query rows [query_start[s], query_start[s+1]); its keys are its first
// seq_lens[s] cached tokens (found through block_tables[s]); the queries are the last
// (query_start[s+1]-query_start[s]) of them, so query i sees keys [0, seq_len - q_len + i].
// Query head h reads kv head h / (num_heads / num_kv_heads) (GQA); head_dim_qk may differ from
// head_dim_v (MLA: 192 vs 128). A sequence may have zero queries; cache slots beyond seq_len
// are never read. scores = q·k * scale, softmax in fp32 (max-subtracted).
struct PagedAttentionParams {
  std::span<const int32_t> query_start;          // num_seqs + 1
  std::span<const int32_t> seq_lens;             // num_seqs
  const std::vector<std::vector<int32_t>>* block_tables = nullptr;  // num_seqs lists
  int64_t block_size = 16;
  float scale = 1.0f;
  // F8_E4M3 caches (both or neither) decode as fp8 * k_scale / v_scale; F32 caches ignore them.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const PagedAttentionParams& params, Tensor& out);

// Row-wise softmax over the last dim, in place (max-subtracted, so large logits are safe).
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
// Outputs expert ids [T, top_k] and weights [T, top_k] (scaled, normalised as configured),
// matching transformers 5:
//   kGreedy: top_k of scores; weights = those scores.
//   kGroupLimitedGreedy (DeepSeek-V2): group score = max of its experts; keep topk_group
//     groups; other experts' scores -> 0.0; top_k of that; weights = the chosen values.
//   kNoauxTc (DeepSeek-V3): choice = scores + correction_bias (null = zeros); group score =
//     sum of its best two choices; keep topk_group groups; other experts -> -inf; top_k of
//     choice; weights = scores without the bias.
//   Then if norm_topk_prob: w /= sum(w) + 1e-20; finally w *= routed_scaling_factor.
// Each token's experts come in descending choice order, lower expert id first on ties.
// correction_bias is read by kNoauxTc only.
void moe_route(const Tensor& router_logits, const MoeRoutingParams& params,
               std::vector<int32_t>& expert_ids, std::vector<float>& expert_weights);

}  // namespace kite::ops
