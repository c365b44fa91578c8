// Dot products of 16-byte BF16 vectors (8 values), the inner step of the GEMV kernels.
#pragma once

#include "kernels/cuda/common.cuh"

namespace kite::cuda {

// acc += <w, x> over the 8 BF16 values packed in each uint4, in fp32.
__device__ __forceinline__ void dot8_bf16(const uint4& w, const uint4& x, float& acc) {
  const auto* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
  const auto* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(wp[i]);
    const float2 b = __bfloat1622float2(xp[i]);
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
}

}  // namespace kite::cuda
