// Greedy sampling: an argmax per row, the row split over a cluster of kBlocks thread blocks
// (one block per row was ~14.5 us of every Llama-3-8B decode step for its 128,256 logits,
// BENCHMARKS.md run 17: ~31 dependent loads a thread), each reading its part in 16-byte
// vectors; block 0 of the cluster reduces the blocks' candidates through distributed shared
// memory. The order (value descending, id ascending) makes the result independent of how the
// row was split between threads and blocks, so it is deterministic and equal to a sequential
// first-maximum scan.
#include <cooperative_groups.h>

#include <climits>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/sampling/sampling.h"

namespace kite::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kBlocks = 8;  // per row: one cluster (8 is the portable cluster size)

__device__ __forceinline__ void take(float v, int i, float& best_v, int& best_i) {
  // NaN compares false, so it never replaces a candidate.
  if (v > best_v || (v == best_v && i < best_i)) best_v = v, best_i = i;
}

// One block's candidate, in its shared memory for the cluster's block 0.
struct Candidate {
  float v;
  int i;
  int bad;
};

// Grid (kBlocks, rows), clusters of (kBlocks, 1, 1): block c of row blockIdx.y scans the c-th
// of kBlocks consecutive parts of the row's vectors (the last one also the scalar tail).
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const T* __restrict__ logits, int64_t vocab, int32_t* __restrict__ ids,
                  int32_t* __restrict__ row_ok) {
  namespace cg = cooperative_groups;
  __shared__ float sm_v[32];
  __shared__ int sm_i[32];
  __shared__ Candidate mine;
  const int part = blockIdx.x;
  const T* row = logits + static_cast<int64_t>(blockIdx.y) * vocab;
  float best_v = -INFINITY;
  int best_i = INT_MAX;
  bool bad = false;  // a NaN or +inf (the host sampler refuses such rows)
  const int64_t vecs = vocab / VEC, per_part = (vecs + kBlocks - 1) / kBlocks;
  const int64_t end = min(vecs, (part + 1) * per_part);
  for (int64_t i = part * per_part + threadIdx.x; i < end; i += blockDim.x) {
    const Vec<T, VEC> v = load_vec<T, VEC>(row + i * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float x = to_float(v.v[j]);
      bad |= isnan(x) || x == INFINITY;
      take(x, static_cast<int>(i * VEC + j), best_v, best_i);
    }
  }
  if (part == kBlocks - 1) {
    for (int64_t i = vecs * VEC + threadIdx.x; i < vocab; i += blockDim.x) {
      const float x = to_float(row[i]);
      bad |= isnan(x) || x == INFINITY;
      take(x, static_cast<int>(i), best_v, best_i);
    }
  }
  bad = __syncthreads_or(bad);
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best_v, offset);
    const int i = __shfl_xor_sync(0xffffffffu, best_i, offset);
    take(v, i, best_v, best_i);
  }
  if (threadIdx.x % 32 == 0) sm_v[threadIdx.x / 32] = best_v, sm_i[threadIdx.x / 32] = best_i;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w)
      take(sm_v[w], sm_i[w], best_v, best_i);
    mine = {best_v, best_i, bad ? 1 : 0};
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's candidate is stored and visible to the cluster
  if (part == 0 && threadIdx.x == 0) {
    bool any_bad = false;
    for (int b = 0; b < kBlocks; ++b) {
      const Candidate c = *cluster.map_shared_rank(&mine, b);
      take(c.v, c.i, best_v, best_i);
      any_bad = any_bad || c.bad;
    }
    ids[blockIdx.y] = best_i == INT_MAX ? 0 : best_i;
    if (row_ok) row_ok[blockIdx.y] = !any_bad && best_v != -INFINITY;
  }
  cluster.sync();  // no block's shared memory may go while block 0 still reads it
}

template <typename T>
void launch(const Tensor& logits, Tensor& ids, int32_t* row_ok, int64_t rows, int64_t vocab,
            cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const T* p = static_cast<const T*>(logits.raw());
  auto* out = static_cast<int32_t*>(ids.raw());
  const dim3 grid(kBlocks, static_cast<unsigned>(rows)), cluster(kBlocks, 1, 1);
  // Rows start 16-byte aligned only when vocab is a multiple of the vector width.
  if (vocab % kVec == 0 && all_aligned(16, p)) {
    launch_pdl_clustered_if(false, cluster, argmax_kernel<T, kVec>, grid, kThreads, 0, stream, p,
                            vocab, out, row_ok);
  } else {
    launch_pdl_clustered_if(false, cluster, argmax_kernel<T, 1>, grid, kThreads, 0, stream, p,
                            vocab, out, row_ok);
  }
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void greedy_sample(const Tensor& logits, Tensor& token_ids, cudaStream_t stream, Tensor* row_ok) {
  constexpr const char* kOp = "greedy_sample";
  check_device_float(logits, kOp, "logits");
  check_device(token_ids, DType::kI32, kOp, "token_ids");
  KITE_CUDA_OP_CHECK(logits.dim() == 2 && logits.size(1) > 0 && logits.size(1) < INT_MAX, kOp,
                     "logits must be [T, vocab], got " + shape_to_string(logits.shape()));
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  KITE_CUDA_OP_CHECK(token_ids.numel() == rows, kOp,
                     "token_ids must hold " + std::to_string(rows) + " ids");
  KITE_CUDA_OP_CHECK(rows <= 65535, kOp, "at most 65,535 rows a launch");
  int32_t* ok = nullptr;
  if (row_ok) {
    check_device(*row_ok, DType::kI32, kOp, "row_ok");
    KITE_CUDA_OP_CHECK(row_ok->numel() == rows, kOp, "row_ok must hold one flag per row");
    ok = static_cast<int32_t*>(row_ok->raw());
  }
  if (rows == 0) return;
  if (logits.dtype() == DType::kF32) {
    launch<float>(logits, token_ids, ok, rows, vocab, stream);
  } else {
    launch<bf16>(logits, token_ids, ok, rows, vocab, stream);
  }
}

}  // namespace kite::cuda
