// Block-wide reductions and scans for the sampling kernels (1024-thread blocks): sums of int
// or double in a fixed order (so results do not depend on timing), an exclusive int scan, and
// the order-preserving integer key of a float.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace kite::cuda::sampling {

// Maps floats to unsigned ints with the same order (-inf lowest, +inf highest; NaN above).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Sum over the block; every thread gets it. `scratch` holds 32 T in shared memory.
template <typename T>
__device__ T block_total(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // scratch may still be read by the previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : T(0);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Exclusive prefix of v over the threads in order; `total` gets the sum. scratch: 33 T.
template <typename T>
__device__ T block_exclusive(T v, T* scratch, T& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = static_cast<int>(blockDim.x >> 5);
  T inclusive = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? scratch[lane] : T(0);
    const T own = w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const T up = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += up;
    }
    scratch[lane] = w - own;  // exclusive prefix over the warps
    if (lane == 31) scratch[32] = w;
  }
  __syncthreads();
  total = scratch[32];
  return scratch[warp] + inclusive - v;
}

}  // namespace kite::cuda::sampling
