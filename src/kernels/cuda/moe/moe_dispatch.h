// MoE dispatch on the GPU, for the model runner: group the (token, k) pairs that moe_route
// chose by expert, gather the tokens' rows in that order, run every expert's linear layer on
// its rows, and combine the results back per token with the routing weights.
//
//   moe_permute(expert_ids)            -> MoePermutation (all on the device, no sync)
//   moe_gather(x, perm)                -> xp [P, H], P = T * top_k, row r = x[pair r's token]
//   moe_grouped_linear(xp, w, perm)    -> yp [P, N], rows of expert e times w[e]^T
//     (or moe_grouped_linear_host: one cuBLASLt call per expert, offsets on the host)
//   moe_combine(yp, weights, perm)     -> out [T, N], out[t] = sum_k w[t,k] * yp[row(t, k)]
//
// Deterministic: the permutation is stable (within an expert, pairs keep their t * top_k + k
// order) and the combine sums each token's top_k rows in k order, in fp32, with no atomics on
// floats. Expert ids outside [0, E) are on the device and cannot be checked without a sync:
// such a pair goes to a trailing bucket after the last expert (no GEMM reads or writes it),
// and moe_combine writes a NaN row for its token.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm/blaslt.h"

namespace kite::cuda {

// Rows of the grouped GEMM's M tile (moe_grouped_linear); tile_offsets count tiles of this.
inline constexpr int kMoeRowTile = 64;

// Device tensors, all I32. P = T * top_k pairs; pair i is (token i / top_k, choice i % top_k).
struct MoePermutation {
  int64_t num_tokens = 0, top_k = 0, num_experts = 0;
  Tensor counts;        // [E]: pairs routed to expert e
  Tensor offsets;       // [E + 1]: expert e owns permuted rows [offsets[e], offsets[e + 1]);
                        // rows [offsets[E], P) hold the pairs with invalid ids
  Tensor tile_offsets;  // [E + 1]: expert e owns row tiles [tile_offsets[e], tile_offsets[e+1])
                        // of kMoeRowTile rows (the grouped GEMM's grid)
  Tensor sorted_pairs;  // [P]: the pair at permuted row r
  Tensor pair_to_row;   // [P]: permuted row of pair i, or -1 when its expert id is invalid
};

// expert_ids I32 [T, top_k] (moe_route's output) -> perm (its tensors are allocated here when
// missing or of the wrong size, so a reused MoePermutation allocates once per shape).
void moe_permute(const Tensor& expert_ids, int64_t num_experts, MoePermutation& perm,
                 cudaStream_t stream);

// xp[r] = x[sorted_pairs[r] / top_k]: x [T, H], xp [T * top_k, H], one dtype (F32 or BF16).
void moe_gather(const Tensor& x, const MoePermutation& perm, Tensor& xp, cudaStream_t stream);

// out[t] = sum_k weights[t, k] * yp[pair_to_row[t * top_k + k]] (fp32 sum, k order): yp
// [T * top_k, N], weights F32 [T, top_k], out [T, N] in yp's dtype; NaN row for a token with
// an invalid expert id. out must not overlap yp.
void moe_combine(const Tensor& yp, const Tensor& weights, const MoePermutation& perm, Tensor& out,
                 cudaStream_t stream);

// The arguments moe_grouped_linear and moe_grouped_gemv share, checked for `op`: BF16 xp [P, K],
// w [E, N, K] and yp [P, N] with P = perm's pairs (tokens x top_k) and E = perm's experts.
struct GroupedLinearDims {
  int64_t pairs, n, k;
};
GroupedLinearDims check_grouped_linear_args(const char* op, const Tensor& xp, const Tensor& w,
                                            const MoePermutation& perm, const Tensor& yp);

// yp[rows of e] = xp[rows of e] · w[e]^T for every expert, on the device with tensor cores:
// xp BF16 [P, K], w BF16 [E, N, K] (the experts' weights stacked), yp BF16 [P, N]; K and N
// multiples of 8. The grid covers every (expert, row tile, column tile) the offsets can need,
// read on the device (no sync); rows past offsets[E] are not written.
void moe_grouped_linear(const Tensor& xp, const Tensor& w, const MoePermutation& perm, Tensor& yp,
                        cudaStream_t stream);

// The same result for decode-size batches, as a stream over the chosen experts' weights: one
// pass over expert e's weight rows per 8 of its rows, fp32 accumulation (moe_grouped_gemv.cu).
// BF16 only; K a multiple of 8; at most 65535 experts. moe_use_gemv() says when it is the
// faster choice: at most one row per two experts on average. (DeepSeek-V2-Lite, 64 experts,
// top 6, ms per decode step, GEMV vs the tensor-core GEMM: 5 tokens 7.03 vs 7.18, 8 tokens
// 8.77 vs 8.47, 10 tokens 8.57 vs 8.03, 64 tokens 23.0 vs 11.75; BENCHMARKS.md, run 7.)
void moe_grouped_gemv(const Tensor& xp, const Tensor& w, const MoePermutation& perm, Tensor& yp,
                      cudaStream_t stream);
inline bool moe_use_gemv(int64_t pairs, int64_t num_experts) {
  return 2 * pairs <= num_experts && num_experts <= 65535;
}

// The same through cuBLASLt, one linear() per expert with rows: host_offsets is offsets
// copied to the host ([E + 1]; the caller syncs for it). Any dtypes linear() takes.
void moe_grouped_linear_host(BlasLtContext& ctx, const Tensor& xp, const Tensor& w,
                             std::span<const int32_t> host_offsets, Tensor& yp,
                             cudaStream_t stream);

}  // namespace kite::cuda
