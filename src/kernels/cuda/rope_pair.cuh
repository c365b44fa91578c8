// One rotary pair, shared by every kernel that rotates (rope.cu, and the decode attention that
// rotates the step's q and k itself: attention/decode_mma.cu), so they give the same bits.
#pragma once

#include "kernels/cuda/common.cuh"

namespace kite::cuda {

// (a, b) -> (a cos - b sin, b cos + a sin), each product rounded before the sum (written out
// with _rn intrinsics, so the compiler cannot contract one kernel's into a multiply-add and not
// the other's).
__device__ __forceinline__ float2 rotate_pair(float a, float b, float cos, float sin) {
  return make_float2(__fsub_rn(__fmul_rn(a, cos), __fmul_rn(b, sin)),
                     __fadd_rn(__fmul_rn(b, cos), __fmul_rn(a, sin)));
}

}  // namespace kite::cuda
