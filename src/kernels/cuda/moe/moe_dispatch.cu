// MoE dispatch: permutation by expert, gather, combine, and the per-expert cuBLASLt loop
// (moe_dispatch.h). The device grouped GEMM is in moe_grouped_gemm.cu.
//
// The permutation takes three launches, none of which needs the host to see a count:
//   1. count: one integer atomicAdd per pair into counts[E] (an integer sum is exact, so the
//      order of the atomics does not matter);
//   2. scan: one block turns counts into offsets and row-tile offsets (exclusive prefix sums);
//   3. place: block e (and block E for the invalid ids) walks the pairs in order, 256 at a
//      time, and gives each of its pairs the next row (a ballot ranks them within a warp, a
//      shared-memory prefix over the warps ranks the warps), so the result is stable. Blocks of
//      experts with no pairs exit at once, and a block stops when it has placed its count.
#include <algorithm>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/moe_dispatch.h"

namespace kite::cuda {
namespace {

constexpr int kScanThreads = 1024;
constexpr int kPlaceThreads = 256;
constexpr int kMaxTopK = 64;

__global__ void count_kernel(const int32_t* __restrict__ ids, int64_t pairs, int num_experts,
                             int32_t* __restrict__ counts) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < pairs;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t e = ids[i];
    if (e >= 0 && e < num_experts) atomicAdd(&counts[e], 1);
  }
}

// Exclusive scan of `v` over the block (1024 threads); every thread gets its prefix and total.
__device__ int block_exclusive_scan(int v, int* scratch, int& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int inclusive = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int w = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += up;
    }
    scratch[32 + lane] = w;  // inclusive prefix over warps
  }
  __syncthreads();
  total = scratch[32 + blockDim.x / 32 - 1];
  const int before = warp > 0 ? scratch[32 + warp - 1] : 0;
  const int result = before + inclusive - v;
  __syncthreads();  // scratch is reused by the next call
  return result;
}

// One block: offsets[e] = sum counts[< e], tile_offsets likewise over ceil(count / tile).
// Each thread scans a contiguous run of experts.
__global__ void __launch_bounds__(kScanThreads)
    scan_kernel(const int32_t* __restrict__ counts, int num_experts, int32_t* __restrict__ offsets,
                int32_t* __restrict__ tile_offsets) {
  __shared__ int scratch[64];
  const int per = (num_experts + kScanThreads - 1) / kScanThreads;
  const int begin = min(num_experts, static_cast<int>(threadIdx.x) * per);
  const int end = min(num_experts, begin + per);
  int rows = 0, tiles = 0;
  for (int e = begin; e < end; ++e) {
    rows += counts[e];
    tiles += (counts[e] + kMoeRowTile - 1) / kMoeRowTile;
  }
  int rows_total = 0, tiles_total = 0;
  int row_base = block_exclusive_scan(rows, scratch, rows_total);
  int tile_base = block_exclusive_scan(tiles, scratch, tiles_total);
  for (int e = begin; e < end; ++e) {
    offsets[e] = row_base;
    tile_offsets[e] = tile_base;
    row_base += counts[e];
    tile_base += (counts[e] + kMoeRowTile - 1) / kMoeRowTile;
  }
  if (threadIdx.x == 0) {
    offsets[num_experts] = rows_total;
    tile_offsets[num_experts] = tiles_total;
  }
}

// Block e < E places expert e's pairs; block E places the pairs with invalid ids.
__global__ void __launch_bounds__(kPlaceThreads)
    place_kernel(const int32_t* __restrict__ ids, int pairs, int num_experts,
                 const int32_t* __restrict__ offsets, int32_t* __restrict__ sorted_pairs,
                 int32_t* __restrict__ pair_to_row) {
  __shared__ int warp_counts[kPlaceThreads / 32];
  const int e = blockIdx.x;
  const bool invalid_bucket = e == num_experts;
  const int first = offsets[e];
  const int want = invalid_bucket ? pairs - offsets[num_experts] : offsets[e + 1] - offsets[e];
  if (want <= 0) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int placed = 0;  // uniform over the block
  for (int base = 0; base < pairs && placed < want; base += kPlaceThreads) {
    const int i = base + threadIdx.x;
    bool mine = false;
    if (i < pairs) {
      const int32_t id = ids[i];
      mine = invalid_bucket ? (id < 0 || id >= num_experts) : id == e;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, chunk = 0;
#pragma unroll
    for (int w = 0; w < kPlaceThreads / 32; ++w) {
      before += w < warp ? warp_counts[w] : 0;
      chunk += warp_counts[w];
    }
    if (mine) {
      const int row = first + placed + before + __popc(ballot & ((1u << lane) - 1u));
      sorted_pairs[row] = i;
      pair_to_row[i] = invalid_bucket ? -1 : row;
    }
    placed += chunk;
    __syncthreads();  // warp_counts is rewritten by the next chunk
  }
}

template <typename T>
__global__ void gather_kernel(const T* __restrict__ x, const int32_t* __restrict__ sorted_pairs,
                              int top_k, int64_t hidden, bool vec16, T* __restrict__ xp) {
  const int64_t row = blockIdx.x;
  const int64_t token = sorted_pairs[row] / top_k;
  const T* src = x + token * hidden;
  T* dst = xp + row * hidden;
  if (vec16) {
    constexpr int kVec = 16 / sizeof(T);
    for (int64_t d = threadIdx.x * int64_t{kVec}; d < hidden; d += blockDim.x * int64_t{kVec})
      store_vec<T, kVec>(dst + d, load_vec<T, kVec>(src + d));
  } else {
    for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) dst[d] = src[d];
  }
}

template <typename T>
__global__ void combine_kernel(const T* __restrict__ yp, const float* __restrict__ weights,
                               const int32_t* __restrict__ pair_to_row, int top_k, int64_t n,
                               bool vec16, T* __restrict__ out) {
  __shared__ int64_t rows[kMaxTopK];
  __shared__ float w[kMaxTopK];
  __shared__ int any_invalid;
  const int64_t t = blockIdx.x;
  if (threadIdx.x == 0) any_invalid = 0;
  __syncthreads();
  if (threadIdx.x < top_k) {
    const int32_t r = pair_to_row[t * top_k + threadIdx.x];
    rows[threadIdx.x] = r;
    w[threadIdx.x] = weights[t * top_k + threadIdx.x];
    if (r < 0) atomicOr(&any_invalid, 1);
  }
  __syncthreads();
  T* dst = out + t * n;
  if (any_invalid) {
    for (int64_t d = threadIdx.x; d < n; d += blockDim.x)
      dst[d] = from_float<T>(__int_as_float(0x7fffffff));
    return;
  }
  constexpr int kVec = 16 / sizeof(T);
  if (vec16) {
    for (int64_t d = threadIdx.x * int64_t{kVec}; d < n; d += blockDim.x * int64_t{kVec}) {
      float acc[kVec] = {};
      for (int k = 0; k < top_k; ++k) {
        const Vec<T, kVec> v = load_vec<T, kVec>(yp + rows[k] * n + d);
#pragma unroll
        for (int j = 0; j < kVec; ++j) acc[j] += w[k] * to_float(v.v[j]);
      }
      Vec<T, kVec> o;
#pragma unroll
      for (int j = 0; j < kVec; ++j) o.v[j] = from_float<T>(acc[j]);
      store_vec<T, kVec>(dst + d, o);
    }
  } else {
    for (int64_t d = threadIdx.x; d < n; d += blockDim.x) {
      float acc = 0.0f;
      for (int k = 0; k < top_k; ++k) acc += w[k] * to_float(yp[rows[k] * n + d]);
      dst[d] = from_float<T>(acc);
    }
  }
}

void ensure(Tensor& t, int64_t n) {
  if (!t.defined() || t.numel() != n || t.dtype() != DType::kI32)
    t = device_empty({n}, DType::kI32);
}

}  // namespace

void moe_permute(const Tensor& expert_ids, int64_t num_experts, MoePermutation& perm,
                 cudaStream_t stream) {
  constexpr const char* op = "moe_permute";
  check_device(expert_ids, DType::kI32, op, "expert_ids");
  KITE_CUDA_OP_CHECK(expert_ids.dim() == 2, op, "expert_ids must be [T, top_k]");
  KITE_CUDA_OP_CHECK(num_experts > 0 && num_experts <= (1 << 20), op,
                     "num_experts must be in [1, 2^20]");
  const int64_t tokens = expert_ids.size(0), top_k = expert_ids.size(1);
  const int64_t pairs = tokens * top_k;
  KITE_CUDA_OP_CHECK(top_k >= 1 && top_k <= kMaxTopK, op,
                     "top_k must be in [1, " + std::to_string(kMaxTopK) + "]");
  KITE_CUDA_OP_CHECK(pairs < (int64_t{1} << 31), op, "too many (token, k) pairs for one call");
  perm.num_tokens = tokens;
  perm.top_k = top_k;
  perm.num_experts = num_experts;
  ensure(perm.counts, num_experts);
  ensure(perm.offsets, num_experts + 1);
  ensure(perm.tile_offsets, num_experts + 1);
  ensure(perm.sorted_pairs, std::max<int64_t>(pairs, 1));
  ensure(perm.pair_to_row, std::max<int64_t>(pairs, 1));
  auto* counts = static_cast<int32_t*>(perm.counts.raw());
  auto* offsets = static_cast<int32_t*>(perm.offsets.raw());
  KITE_CUDA_CHECK(cudaMemsetAsync(counts, 0, num_experts * sizeof(int32_t), stream));
  const auto* ids = static_cast<const int32_t*>(expert_ids.raw());
  if (pairs > 0) {
    const int64_t blocks = std::min<int64_t>((pairs + 255) / 256, 1024);
    count_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
        ids, pairs, static_cast<int>(num_experts), counts);
    KITE_CUDA_CHECK_LAUNCH();
  }
  scan_kernel<<<1, kScanThreads, 0, stream>>>(counts, static_cast<int>(num_experts), offsets,
                                              static_cast<int32_t*>(perm.tile_offsets.raw()));
  KITE_CUDA_CHECK_LAUNCH();
  if (pairs > 0) {
    place_kernel<<<static_cast<unsigned>(num_experts + 1), kPlaceThreads, 0, stream>>>(
        ids, static_cast<int>(pairs), static_cast<int>(num_experts), offsets,
        static_cast<int32_t*>(perm.sorted_pairs.raw()),
        static_cast<int32_t*>(perm.pair_to_row.raw()));
    KITE_CUDA_CHECK_LAUNCH();
  }
}

void moe_gather(const Tensor& x, const MoePermutation& perm, Tensor& xp, cudaStream_t stream) {
  constexpr const char* op = "moe_gather";
  check_device_float(x, op, "x");
  check_device(xp, x.dtype(), op, "xp");
  const int64_t pairs = perm.num_tokens * perm.top_k;
  KITE_CUDA_OP_CHECK(x.dim() == 2 && x.size(0) == perm.num_tokens, op,
                     "x must be [T, H] with T = the permutation's tokens");
  KITE_CUDA_OP_CHECK(xp.dim() == 2 && xp.size(0) == pairs && xp.size(1) == x.size(1), op,
                     "xp must be [T * top_k, H]");
  KITE_CUDA_OP_CHECK(!bytes_overlap(x, xp), op, "xp must not overlap x");
  if (pairs == 0 || x.size(1) == 0) return;
  const int64_t hidden = x.size(1);
  const bool vec16 =
      (hidden * dtype_size(x.dtype())) % 16 == 0 && all_aligned(16, x.raw(), xp.raw());
  const auto* sorted = static_cast<const int32_t*>(perm.sorted_pairs.raw());
  const int top_k = static_cast<int>(perm.top_k);
  if (x.dtype() == DType::kBF16) {
    gather_kernel<bf16><<<static_cast<unsigned>(pairs), 128, 0, stream>>>(
        static_cast<const bf16*>(x.raw()), sorted, top_k, hidden, vec16,
        static_cast<bf16*>(xp.raw()));
  } else {
    gather_kernel<float><<<static_cast<unsigned>(pairs), 128, 0, stream>>>(
        static_cast<const float*>(x.raw()), sorted, top_k, hidden, vec16,
        static_cast<float*>(xp.raw()));
  }
  KITE_CUDA_CHECK_LAUNCH();
}

void moe_combine(const Tensor& yp, const Tensor& weights, const MoePermutation& perm, Tensor& out,
                 cudaStream_t stream) {
  constexpr const char* op = "moe_combine";
  check_device_float(yp, op, "yp");
  check_device(weights, DType::kF32, op, "weights");
  check_device(out, yp.dtype(), op, "out");
  const int64_t tokens = perm.num_tokens, pairs = tokens * perm.top_k;
  KITE_CUDA_OP_CHECK(yp.dim() == 2 && yp.size(0) == pairs, op, "yp must be [T * top_k, N]");
  KITE_CUDA_OP_CHECK(
      weights.dim() == 2 && weights.size(0) == tokens && weights.size(1) == perm.top_k, op,
      "weights must be [T, top_k]");
  KITE_CUDA_OP_CHECK(out.dim() == 2 && out.size(0) == tokens && out.size(1) == yp.size(1), op,
                     "out must be [T, N]");
  KITE_CUDA_OP_CHECK(!bytes_overlap(out, yp), op, "out must not overlap yp");
  if (tokens == 0 || yp.size(1) == 0) return;
  const int64_t n = yp.size(1);
  const bool vec16 = (n * dtype_size(yp.dtype())) % 16 == 0 && all_aligned(16, yp.raw(), out.raw());
  const auto* rows = static_cast<const int32_t*>(perm.pair_to_row.raw());
  const auto* w = static_cast<const float*>(weights.raw());
  const int top_k = static_cast<int>(perm.top_k);
  if (yp.dtype() == DType::kBF16) {
    combine_kernel<bf16><<<static_cast<unsigned>(tokens), 128, 0, stream>>>(
        static_cast<const bf16*>(yp.raw()), w, rows, top_k, n, vec16,
        static_cast<bf16*>(out.raw()));
  } else {
    combine_kernel<float><<<static_cast<unsigned>(tokens), 128, 0, stream>>>(
        static_cast<const float*>(yp.raw()), w, rows, top_k, n, vec16,
        static_cast<float*>(out.raw()));
  }
  KITE_CUDA_CHECK_LAUNCH();
}

GroupedLinearDims check_grouped_linear_args(const char* op, const Tensor& xp, const Tensor& w,
                                            const MoePermutation& perm, const Tensor& yp) {
  check_device(xp, DType::kBF16, op, "xp");
  check_device(w, DType::kBF16, op, "w");
  check_device(yp, DType::kBF16, op, "yp");
  const int64_t pairs = perm.num_tokens * perm.top_k;
  KITE_CUDA_OP_CHECK(w.dim() == 3 && w.size(0) == perm.num_experts, op,
                     "w must be [E, N, K] with E = the permutation's experts");
  const int64_t n = w.size(1), k = w.size(2);
  KITE_CUDA_OP_CHECK(xp.dim() == 2 && xp.size(0) == pairs && xp.size(1) == k, op,
                     "xp must be [T * top_k, K]");
  KITE_CUDA_OP_CHECK(yp.dim() == 2 && yp.size(0) == pairs && yp.size(1) == n, op,
                     "yp must be [T * top_k, N]");
  return {pairs, n, k};
}

void moe_grouped_linear_host(BlasLtContext& ctx, const Tensor& xp, const Tensor& w,
                             std::span<const int32_t> host_offsets, Tensor& yp,
                             cudaStream_t stream) {
  constexpr const char* op = "moe_grouped_linear_host";
  KITE_CUDA_OP_CHECK(w.dim() == 3, op, "w must be [E, N, K]");
  const int64_t experts = w.size(0);
  KITE_CUDA_OP_CHECK(static_cast<int64_t>(host_offsets.size()) == experts + 1, op,
                     "host_offsets must have E + 1 entries");
  KITE_CUDA_OP_CHECK(xp.dim() == 2 && yp.dim() == 2 && xp.size(0) == yp.size(0), op,
                     "xp [P, K] and yp [P, N] must have the same rows");
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t begin = host_offsets[e], end = host_offsets[e + 1];
    KITE_CUDA_OP_CHECK(0 <= begin && begin <= end && end <= xp.size(0), op,
                       "host_offsets must be non-decreasing within [0, P]");
    if (begin == end) continue;
    const Tensor we = w.slice_rows(e, e + 1).view({w.size(1), w.size(2)});
    Tensor ye = yp.slice_rows(begin, end);
    linear(ctx, xp.slice_rows(begin, end), we, nullptr, ye, stream);
  }
}

}  // namespace kite::cuda
