// The dynamic activation quantization's scale, one rule for the CPU reference
// (fake_quantize_{fp8,int8}_rows) and the CUDA kernels (quant_activation.cu, the bulk GEMV's
// in-block codes), so their codes agree bit for bit.
//
// scale = amax / qmax (1 for an all-zero row), never below FLT_MIN; code = encode(v * (1 / scale)).
// Why a reciprocal and not v / scale: the division is ~8 instructions an element against one
// multiply, and the bulk GEMV runs it in every block before its first MMA (Llama-3-8B FP8 batch 1
// 1 % faster a decode step; BENCHMARKS.md, run 30). Why the floor: 1 / scale must stay finite
// (a row of magnitudes below ~1e-36 would otherwise turn its zeros into 0 * inf = NaN).
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define KITE_HOST_DEVICE __host__ __device__
#else
#define KITE_HOST_DEVICE
#endif

namespace kite {

inline constexpr float kMinActivationScale = 0x1p-126f;  // FLT_MIN: 1 / scale <= 2^126

KITE_HOST_DEVICE inline float activation_scale(float amax, float qmax) {
  return amax > 0.0f ? fmaxf(amax / qmax, kMinActivationScale) : 1.0f;
}

}  // namespace kite

#undef KITE_HOST_DEVICE
