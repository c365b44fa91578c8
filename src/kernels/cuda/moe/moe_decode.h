// Decode-size MoE in one or two streaming launches (moe_decode_bulk.cu), for steps of a few tokens:
// where the permutation path (moe_dispatch.h) spends about ten launches per layer (permute,
// gather, two expert GEMVs, silu_mul, combine, then the shared experts and an add), this reads
// the routed experts straight from the router's choices and folds the shared experts in:
//
//   1. act[t, k] = silu(x[t] · Wg[e]^T) * (x[t] · Wu[e]^T) with e = ids[t, k], and
//      act_s[t]  = the same with the shared experts' [Wg; Wu];
//   2. out[t]    = sum_k weights[t, k] * act[t, k] · Wd[e]^T  +  act_s[t] · Wd_s^T  (fp32 sum).
//
// Both kernels stream the weights through shared memory with Hopper's bulk copies, one
// persistent block per SM (as gemm/gemv_bulk.cu). moe_decode runs both steps in one launch
// where act fits in shared memory beside the ring (DeepSeek-V2-Lite: up to 4 tokens): the
// blocks meet at a grid-wide barrier between the steps while the down weights already stream
// (DeepSeek-V2-Lite decode 2-4 % faster at batches 2-4, BENCHMARKS.md run 12). A
// pair's expert weights are read once per pair, not once per expert: two tokens that chose one
// expert read it twice, which is why this is only for a few tokens. A token with an expert id
// outside [0, E) gets a NaN row (the ids are on the device; moe_combine does the same).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor.h"

namespace kite::cuda {

// The most tokens the two launches take (their reads grow with tokens * top_k).
inline constexpr int64_t kMoeDecodeMaxTokens = 4;

// BF16 weights: gate_up [E, 2I, d] (each expert's gate rows, then its up rows), down [E, d, I];
// shared_gate_up [2Is, d] and shared_down [d, Is], or both undefined (no shared experts).
// d, I and Is multiples of 8.
struct MoeDecodeWeights {
  Tensor gate_up, down, shared_gate_up, shared_down;
};

// Whether the two launches take this step: x [T, d] with T <= kMoeDecodeMaxTokens, x and the
// weights BF16, d, I and Is multiples of 8 (the shapes themselves are checked by the launches).
bool moe_decode_applies(const Tensor& x, const MoeDecodeWeights& w);

// Step 1: x BF16 [T, d], ids I32 [T, top_k] (moe_route's) -> act, BF16 scratch of at least
// moe_decode_act_elems(...) elements: the shared experts' [T, Is], then the pairs' [T * top_k, I].
void moe_decode_gate_up(const Tensor& x, const Tensor& ids, const MoeDecodeWeights& w, Tensor& act,
                        cudaStream_t stream);

// Step 2: act of step 1, ids and weights F32 [T, top_k] (moe_route's) -> out BF16 [T, d].
void moe_decode_down(const Tensor& ids, const Tensor& weights, const MoeDecodeWeights& w,
                     const Tensor& act, Tensor& out, cudaStream_t stream);

// How moe_decode runs: kAuto takes one launch where it fits (moe_decode_one_launch_fits) unless
// KITE_CUDA_MOE_ONE_LAUNCH=0; kOne insists (std::invalid_argument where it does not fit); kTwo
// runs the two steps above.
enum class MoeDecodeLaunches { kAuto, kOne, kTwo };

// When one launch runs both steps, it may start early: kEarly computes gate_up at once, before
// the kernel it follows has ended — the shared experts while the router still runs; only the
// producer's routed copies wait for the ids — and waits for that kernel only before down, the
// first step that reads the routing's weights. The caller guarantees what that takes: the
// launch follows moe_route(..., trigger_first = true), and every kernel before the one the
// routing follows has ended when the routing launches — true in the model, where the routing
// follows the router GEMV, which lets it launch only after its own pdl_wait. Then x is
// complete, no earlier kernel still reads act, and an earlier one-launch MoE on the stream has
// left its grid barrier's counters. kAfterPrevious waits for the previous kernel first.
enum class MoeDecodeStart { kAfterPrevious, kEarly };

// Both steps: x, ids and weights as above -> out BF16 [T, d]; act is scratch as for step 1.
void moe_decode(const Tensor& x, const Tensor& ids, const Tensor& weights,
                const MoeDecodeWeights& w, Tensor& act, Tensor& out, cudaStream_t stream,
                MoeDecodeLaunches launches = MoeDecodeLaunches::kAuto,
                MoeDecodeStart start = MoeDecodeStart::kAfterPrevious);

// Whether the one-launch kernel's shared memory (the ring and a copy of act) fits the device.
bool moe_decode_one_launch_fits(int64_t tokens, int64_t top_k, int64_t inter, int64_t shared_inter);

inline int64_t moe_decode_act_elems(int64_t tokens, int64_t top_k, int64_t inter,
                                    int64_t shared_inter) {
  return tokens * (top_k * inter + shared_inter);
}

}  // namespace kite::cuda
