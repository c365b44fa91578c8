// sampling_draw (sampling_params_gpu.h): one 1024-thread block per row. Thread t owns the
// contiguous ids [t * seg, (t + 1) * seg); the block sums exp(filtered) per segment (double),
// scans the segment sums in id order, and the thread whose segment holds u * total walks it to
// the drawn id. u is one Philox4x32-10 double in [0, 1) for (seed, offset), the same for every
// thread of the row.
#include <curand_kernel.h>

#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling/sampling_params_gpu.h"
#include "kernels/cuda/sampling/sampling_reduce.cuh"

namespace kite::cuda {
namespace {

constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads)
    draw_kernel(const float* __restrict__ filtered, int vocab, const int64_t* __restrict__ seeds,
                const int64_t* __restrict__ offsets, int32_t* __restrict__ token_ids) {
  __shared__ double scratch[33];
  __shared__ int chosen, last_positive;
  const int r = blockIdx.x;
  const float* row = filtered + static_cast<int64_t>(r) * vocab;
  const int seg = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, static_cast<int>(threadIdx.x) * seg), end = min(vocab, begin + seg);
  double local = 0.0;
  int last = -1;
  for (int i = begin; i < end; ++i) {
    const float w = expf(row[i]);
    local += w;
    if (w > 0.0f) last = i;
  }
  if (threadIdx.x == 0) chosen = INT_MAX, last_positive = -1;
  double total;
  const double before = sampling::block_exclusive(local, scratch, total);  // has barriers
  if (last >= 0) atomicMax(&last_positive, last);

  curandStatePhilox4_32_10_t state;
  curand_init(static_cast<unsigned long long>(seeds[r]), 0,
              static_cast<unsigned long long>(offsets[r]), &state);
  const double u = 1.0 - curand_uniform_double(&state);  // (0, 1] -> [0, 1)
  const double target = u * total;
  if (local > 0.0 && before <= target && target < before + local) {
    double acc = before;
    int pick = last;
    for (int i = begin; i < end; ++i) {
      const float w = expf(row[i]);
      acc += w;
      if (w > 0.0f && acc > target) {
        pick = i;
        break;
      }
    }
    atomicMin(&chosen, pick);  // one thread in exact arithmetic; the lowest if rounding ties
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int id = chosen;
    if (id == INT_MAX) id = last_positive;  // target rounded past the last segment
    token_ids[r] = id < 0 ? 0 : id;         // nothing drawable: token 0, as greedy_sample
  }
}

}  // namespace

void sampling_draw(const Tensor& filtered, const GpuSamplingParams& params, Tensor& token_ids,
                   cudaStream_t stream) {
  constexpr const char* op = "sampling_draw";
  check_device(filtered, DType::kF32, op, "filtered");
  check_device(token_ids, DType::kI32, op, "token_ids");
  check_device(params.seed, DType::kI64, op, "seed");
  check_device(params.offset, DType::kI64, op, "offset");
  KITE_CUDA_OP_CHECK(filtered.dim() == 2, op, "filtered must be [R, vocab]");
  const int64_t rows = filtered.size(0), vocab = filtered.size(1);
  KITE_CUDA_OP_CHECK(
      token_ids.numel() == rows && params.seed.numel() == rows && params.offset.numel() == rows, op,
      "token_ids, seed and offset need one entry per row");
  KITE_CUDA_OP_CHECK(vocab > 0 && vocab < (int64_t{1} << 30), op, "vocab must be in [1, 2^30)");
  if (rows == 0) return;
  draw_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      static_cast<const float*>(filtered.raw()), static_cast<int>(vocab),
      static_cast<const int64_t*>(params.seed.raw()),
      static_cast<const int64_t*>(params.offset.raw()), static_cast<int32_t*>(token_ids.raw()));
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
