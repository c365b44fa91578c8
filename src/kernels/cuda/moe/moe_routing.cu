// MoE router: scores (softmax or sigmoid), optional group limiting (DeepSeek-V2 max-of-group,
// DeepSeek-V3 sum-of-best-two with the correction bias), then top_k by repeated argmax. Every
// comparison is (value descending, expert id ascending), the order of the CPU op, so the same
// experts come out in the same order. Up to 256 experts (every DeepSeek model) one warp routes
// a token with shuffles only; beyond, one block per token with block-wide reductions (its ~25
// block barriers made it a 6.5 us kernel at DeepSeek-V2-Lite's 64 experts, batch 1).
#include <climits>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/moe/moe_routing.h"

namespace kite::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxExperts = 4096;
constexpr int kMaxGroups = 64;
constexpr int kWarpExperts = 256;  // the warp-per-token kernel's limit
constexpr int kWarpTokens = 4;     // tokens (warps) per block of the warp kernel

struct RouteParams {
  int num_experts, top_k, n_group, topk_group;
  bool sigmoid, group_limited, noaux, norm_topk_prob;
  float routed_scaling_factor;
  const float* bias;   // [E] or null
  bool trigger_first;  // let the next launch start before waiting for the logits
};

// The kernels' start: launched early (PDL), they read the logits only after the router's GEMV
// completes, and let the kernel after them launch before or after that wait.
__device__ __forceinline__ void route_wait_and_trigger(const RouteParams& p) {
  if (p.trigger_first) pdl_trigger();
  pdl_wait();
  if (!p.trigger_first) pdl_trigger();
}

__device__ __forceinline__ bool better(float v, int i, float best_v, int best_i) {
  return v > best_v || (v == best_v && i < best_i);
}

// A group of experts' score from their choice values: V3 (noaux) the sum of the best two (the
// best for a 1-expert group), V2 the best.
__device__ __forceinline__ float group_score_of(const float* c, int group_size, bool noaux) {
  float best1 = -INFINITY, best2 = -INFINITY;
  for (int i = 0; i < group_size; ++i) {
    if (c[i] > best1) {
      best2 = best1;
      best1 = c[i];
    } else if (c[i] > best2) {
      best2 = c[i];
    }
  }
  return noaux ? (group_size >= 2 ? best1 + best2 : best1) : best1;
}

// keep[g] for the topk_group best groups (the first on equal scores), one thread.
__device__ __forceinline__ void choose_groups(const float* score, int n_group, int topk_group,
                                              bool* keep) {
  for (int g = 0; g < n_group; ++g) keep[g] = false;
  for (int r = 0; r < topk_group; ++r) {
    int best = -1;
    for (int g = 0; g < n_group; ++g)
      if (!keep[g] && (best < 0 || score[g] > score[best])) best = g;
    keep[best] = true;
  }
}

// Block-wide argmax of (value desc, index asc) over entries with !taken[i]; all threads get it.
__device__ int block_argmax(const float* values, const bool* taken, int n, float* sm_v, int* sm_i) {
  float best_v = -INFINITY;
  int best_i = INT_MAX;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (!taken[i] && better(values[i], i, best_v, best_i)) best_v = values[i], best_i = i;
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best_v, offset);
    const int i = __shfl_xor_sync(0xffffffffu, best_i, offset);
    if (better(v, i, best_v, best_i)) best_v = v, best_i = i;
  }
  __syncthreads();  // sm_v/sm_i may be in use by the previous call
  if (threadIdx.x % 32 == 0) sm_v[threadIdx.x / 32] = best_v, sm_i[threadIdx.x / 32] = best_i;
  __syncthreads();
  best_v = -INFINITY;
  best_i = INT_MAX;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w)
    if (better(sm_v[w], sm_i[w], best_v, best_i)) best_v = sm_v[w], best_i = sm_i[w];
  return best_i;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    moe_route_kernel(const T* __restrict__ logits, const RouteParams p, int32_t* __restrict__ ids,
                     float* __restrict__ weights) {
  extern __shared__ float smem[];
  float* scores = smem;                                           // [E]
  float* choice = smem + p.num_experts;                           // [E]
  bool* taken = reinterpret_cast<bool*>(choice + p.num_experts);  // [E]
  __shared__ float scratch[32];
  __shared__ float sm_v[32];
  __shared__ int sm_i[32];
  __shared__ bool keep_group[kMaxGroups];
  __shared__ int chosen[32];

  route_wait_and_trigger(p);
  const int E = p.num_experts;
  const T* row = logits + static_cast<int64_t>(blockIdx.x) * E;
  float local_max = -INFINITY;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    scores[e] = to_float(row[e]);
    local_max = fmaxf(local_max, scores[e]);
    taken[e] = false;
  }
  if (p.sigmoid) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) scores[e] = 1.0f / (1.0f + expf(-scores[e]));
  } else {
    const float m = block_max(local_max, scratch);
    float local_sum = 0.0f;
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      scores[e] = expf(scores[e] - m);
      local_sum += scores[e];
    }
    const float inv = 1.0f / block_sum(local_sum, scratch);
    for (int e = threadIdx.x; e < E; e += blockDim.x) scores[e] *= inv;
  }
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    choice[e] = scores[e] + (p.noaux && p.bias ? p.bias[e] : 0.0f);
  __syncthreads();

  if (p.group_limited || p.noaux) {
    const int group_size = E / p.n_group;
    __shared__ float group_score[kMaxGroups];
    for (int g = threadIdx.x; g < p.n_group; g += blockDim.x)
      group_score[g] = group_score_of(choice + g * group_size, group_size, p.noaux);
    __syncthreads();
    if (threadIdx.x == 0) choose_groups(group_score, p.n_group, p.topk_group, keep_group);
    __syncthreads();
    const float masked = p.noaux ? -INFINITY : 0.0f;
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      if (!keep_group[e / group_size]) choice[e] = masked;
    __syncthreads();
  }

  for (int r = 0; r < p.top_k; ++r) {
    const int best = block_argmax(choice, taken, E, sm_v, sm_i);
    if (threadIdx.x == 0) {
      chosen[r] = best == INT_MAX ? -1 : best;
      if (best != INT_MAX) taken[best] = true;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    int32_t* out_ids = ids + static_cast<int64_t>(blockIdx.x) * p.top_k;
    float* out_w = weights + static_cast<int64_t>(blockIdx.x) * p.top_k;
    float sum = 0.0f;
    for (int r = 0; r < p.top_k; ++r) {
      const int e = chosen[r];
      out_ids[r] = e < 0 ? 0 : e;
      out_w[r] = e < 0 ? __int_as_float(0x7fffffff) : (p.noaux ? scores[e] : choice[e]);
      sum += out_w[r];
    }
    const float denom = sum + 1e-20f;
    for (int r = 0; r < p.top_k; ++r) {
      if (p.norm_topk_prob) out_w[r] /= denom;
      out_w[r] *= p.routed_scaling_factor;
    }
  }
}

// One warp per token, lane l holding experts l, l + 32, ...: the block kernel's arithmetic (the
// softmax's max and sum are reduced in another order, so weights may differ in the last bit;
// the group scores and choices are computed exactly as there).
template <typename T>
__global__ void __launch_bounds__(32 * kWarpTokens)
    moe_route_warp_kernel(const T* __restrict__ logits, const RouteParams p, int64_t tokens,
                          int32_t* __restrict__ ids, float* __restrict__ weights) {
  constexpr int V = kWarpExperts / 32;
  __shared__ float sm_scores[kWarpTokens][kWarpExperts];
  __shared__ float sm_choice[kWarpTokens][kWarpExperts];
  __shared__ float sm_group[kWarpTokens][kMaxGroups];
  __shared__ bool sm_keep[kWarpTokens][kMaxGroups];
  route_wait_and_trigger(p);
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tok = int64_t{blockIdx.x} * kWarpTokens + w;
  if (tok >= tokens) return;
  const int E = p.num_experts;
  const T* row = logits + tok * E;
  float* scores = sm_scores[w];
  float* choice = sm_choice[w];
  float s[V];
  float local_max = -INFINITY;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int e = lane + 32 * v;
    s[v] = e < E ? to_float(row[e]) : -INFINITY;
    local_max = fmaxf(local_max, s[v]);
  }
  if (p.sigmoid) {
#pragma unroll
    for (int v = 0; v < V; ++v) s[v] = 1.0f / (1.0f + expf(-s[v]));
  } else {
    const float m = warp_max(local_max);
    float local_sum = 0.0f;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      s[v] = lane + 32 * v < E ? expf(s[v] - m) : 0.0f;
      local_sum += s[v];
    }
    const float inv = 1.0f / warp_sum(local_sum);
#pragma unroll
    for (int v = 0; v < V; ++v) s[v] *= inv;
  }
  float c[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int e = lane + 32 * v;
    c[v] = s[v] + (p.noaux && p.bias && e < E ? p.bias[e] : 0.0f);
    if (e < E) scores[e] = s[v], choice[e] = c[v];
  }
  __syncwarp();

  if (p.group_limited || p.noaux) {
    const int group_size = E / p.n_group;
    for (int g = lane; g < p.n_group; g += 32)
      sm_group[w][g] = group_score_of(choice + g * group_size, group_size, p.noaux);
    __syncwarp();
    if (lane == 0) choose_groups(sm_group[w], p.n_group, p.topk_group, sm_keep[w]);
    __syncwarp();
    const float masked = p.noaux ? -INFINITY : 0.0f;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int e = lane + 32 * v;
      if (e < E && !sm_keep[w][e / group_size]) c[v] = masked, choice[e] = masked;
    }
    __syncwarp();
  }

  // top_k rounds of a warp argmax; lane r keeps the r-th choice.
  uint32_t taken = 0;  // bit v: expert lane + 32 v was chosen
  int mine = -1;
  for (int r = 0; r < p.top_k; ++r) {
    float best_v = -INFINITY;
    int best_i = INT_MAX;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int e = lane + 32 * v;
      if (e < E && !(taken >> v & 1u) && better(c[v], e, best_v, best_i)) best_v = c[v], best_i = e;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best_v, offset);
      const int oi = __shfl_xor_sync(0xffffffffu, best_i, offset);
      if (better(ov, oi, best_v, best_i)) best_v = ov, best_i = oi;
    }
    if (best_i != INT_MAX && best_i % 32 == lane) taken |= 1u << (best_i / 32);
    if (lane == r) mine = best_i == INT_MAX ? -1 : best_i;
  }
  const float my_w =
      lane < p.top_k ? (mine < 0 ? __int_as_float(0x7fffffff) : (p.noaux ? scores : choice)[mine])
                     : 0.0f;
  float sum = 0.0f;  // in choice order, as the block kernel
  for (int r = 0; r < p.top_k; ++r) sum += __shfl_sync(0xffffffffu, my_w, r);
  if (lane < p.top_k) {
    float out_w = my_w;
    if (p.norm_topk_prob) out_w /= sum + 1e-20f;
    out_w *= p.routed_scaling_factor;
    ids[tok * p.top_k + lane] = mine < 0 ? 0 : mine;
    weights[tok * p.top_k + lane] = out_w;
  }
}

}  // namespace

void moe_route(const Tensor& router_logits, const ops::MoeRoutingParams& params, Tensor& expert_ids,
               Tensor& expert_weights, cudaStream_t stream, bool trigger_first) {
  constexpr const char* kOp = "moe_route";
  check_device_float(router_logits, kOp, "router_logits");
  check_device(expert_ids, DType::kI32, kOp, "expert_ids");
  check_device(expert_weights, DType::kF32, kOp, "expert_weights");
  KITE_CUDA_OP_CHECK(router_logits.dim() >= 1 && router_logits.size(-1) > 0 &&
                         router_logits.size(-1) <= kMaxExperts,
                     kOp,
                     "router_logits " + shape_to_string(router_logits.shape()) + " needs 1 to " +
                         std::to_string(kMaxExperts) + " experts");
  const int64_t E = router_logits.size(-1);
  const int64_t tokens = router_logits.numel() / E;
  const int64_t k = params.top_k;
  KITE_CUDA_OP_CHECK(k >= 1 && k <= E && k <= 32, kOp,
                     "top_k " + std::to_string(k) + " must be in [1, min(32, experts)]");
  const bool grouped = params.method != ops::MoeTopkMethod::kGreedy;
  if (grouped) {
    KITE_CUDA_OP_CHECK(params.n_group >= 1 && params.n_group <= kMaxGroups &&
                           E % params.n_group == 0 && params.topk_group >= 1 &&
                           params.topk_group <= params.n_group,
                       kOp,
                       "n_group " + std::to_string(params.n_group) + " must divide " +
                           std::to_string(E) + " experts (at most 64 groups) and topk_group " +
                           std::to_string(params.topk_group) + " must be in [1, n_group]");
  }
  const bool noaux = params.method == ops::MoeTopkMethod::kNoauxTc;
  if (noaux && params.correction_bias) {
    check_device(*params.correction_bias, DType::kF32, kOp, "correction_bias");
    KITE_CUDA_OP_CHECK(params.correction_bias->numel() == E, kOp,
                       "correction_bias must have " + std::to_string(E) + " values");
  }
  KITE_CUDA_OP_CHECK(expert_ids.numel() == tokens * k && expert_weights.numel() == tokens * k, kOp,
                     "expert_ids and expert_weights must hold [" + std::to_string(tokens) + ", " +
                         std::to_string(k) + "] values");
  KITE_CUDA_OP_CHECK(tokens <= INT32_MAX, kOp, "too many tokens for one launch");
  if (tokens == 0) return;
  RouteParams p{};
  p.num_experts = static_cast<int>(E);
  p.top_k = static_cast<int>(k);
  p.n_group = grouped ? static_cast<int>(params.n_group) : 1;
  p.topk_group = grouped ? static_cast<int>(params.topk_group) : 1;
  p.sigmoid = params.scoring == ops::MoeScoring::kSigmoid;
  p.group_limited = params.method == ops::MoeTopkMethod::kGroupLimitedGreedy;
  p.noaux = noaux;
  p.norm_topk_prob = params.norm_topk_prob;
  p.routed_scaling_factor = params.routed_scaling_factor;
  p.bias = noaux && params.correction_bias
               ? static_cast<const float*>(params.correction_bias->raw())
               : nullptr;
  p.trigger_first = trigger_first;
  const size_t smem = static_cast<size_t>(E) * (2 * sizeof(float) + sizeof(bool));
  auto* ids = static_cast<int32_t*>(expert_ids.raw());
  auto* w = static_cast<float*>(expert_weights.raw());
  if (E <= kWarpExperts) {
    const dim3 grid(static_cast<unsigned>((tokens + kWarpTokens - 1) / kWarpTokens));
    if (router_logits.dtype() == DType::kF32)
      launch_pdl(moe_route_warp_kernel<float>, grid, 32 * kWarpTokens, 0, stream,
                 static_cast<const float*>(router_logits.raw()), p, tokens, ids, w);
    else
      launch_pdl(moe_route_warp_kernel<bf16>, grid, 32 * kWarpTokens, 0, stream,
                 static_cast<const bf16*>(router_logits.raw()), p, tokens, ids, w);
    KITE_CUDA_CHECK_LAUNCH();
    return;
  }
  const auto grid = static_cast<unsigned>(tokens);
  if (router_logits.dtype() == DType::kF32) {
    launch_pdl(moe_route_kernel<float>, dim3(grid), kThreads, smem, stream,
               static_cast<const float*>(router_logits.raw()), p, ids, w);
  } else {
    launch_pdl(moe_route_kernel<bf16>, dim3(grid), kThreads, smem, stream,
               static_cast<const bf16*>(router_logits.raw()), p, ids, w);
  }
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
