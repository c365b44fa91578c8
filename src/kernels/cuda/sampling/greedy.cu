// Greedy sampling: a block-wide argmax per row, reading the row in 16-byte vectors. The order
// (value descending, id ascending) makes the result independent of how the row was split
// between threads, so it is deterministic and equal to a sequential first-maximum scan.
#include <climits>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/sampling/sampling.h"

namespace kite::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ void take(float v, int i, float& best_v, int& best_i) {
  // NaN compares false, so it never replaces a candidate.
  if (v > best_v || (v == best_v && i < best_i)) best_v = v, best_i = i;
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const T* __restrict__ logits, int64_t vocab, int32_t* __restrict__ ids,
                  int32_t* __restrict__ row_ok) {
  __shared__ float sm_v[32];
  __shared__ int sm_i[32];
  const T* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float best_v = -INFINITY;
  int best_i = INT_MAX;
  bool bad = false;  // a NaN or +inf (the host sampler refuses such rows)
  const int64_t vecs = vocab / VEC;
  for (int64_t i = threadIdx.x; i < vecs; i += blockDim.x) {
    const Vec<T, VEC> v = load_vec<T, VEC>(row + i * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float x = to_float(v.v[j]);
      bad |= isnan(x) || x == INFINITY;
      take(x, static_cast<int>(i * VEC + j), best_v, best_i);
    }
  }
  for (int64_t i = vecs * VEC + threadIdx.x; i < vocab; i += blockDim.x) {
    const float x = to_float(row[i]);
    bad |= isnan(x) || x == INFINITY;
    take(x, static_cast<int>(i), best_v, best_i);
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
    ids[blockIdx.x] = best_i == INT_MAX ? 0 : best_i;
    if (row_ok) row_ok[blockIdx.x] = !bad && best_v != -INFINITY;
  }
}

template <typename T>
void launch(const Tensor& logits, Tensor& ids, int32_t* row_ok, int64_t rows, int64_t vocab,
            cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const T* p = static_cast<const T*>(logits.raw());
  auto* out = static_cast<int32_t*>(ids.raw());
  // Rows start 16-byte aligned only when vocab is a multiple of the vector width.
  if (vocab % kVec == 0 && all_aligned(16, p)) {
    argmax_kernel<T, kVec><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(p, vocab, out,
                                                                                row_ok);
  } else {
    argmax_kernel<T, 1><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(p, vocab, out,
                                                                             row_ok);
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
  KITE_CUDA_OP_CHECK(rows <= INT32_MAX, kOp, "too many rows for one launch");
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
