// The activation preparation of the quantized linears (quant_linear.cu): W4A16's permuted /
// input-scaled / padded copy of x, and the W8A8 formats' dynamic FP8 / INT8 activation codes,
// per token or per token per group (FP8 block).
#include <cuda_fp8.h>

#include <algorithm>
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/env_switch.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/quant/quant_activation.h"
#include "kernels/cuda/quant/quant_geometry.h"
#include "kernels/cuda/quant/quant_kernel.cuh"
#include "quant/activation_scale.h"

namespace kite::cuda {
namespace {

using namespace quant_detail;


// W4A16: xp[r, j] = bf16(x[r, perm[j]] * input_scale[perm[j]]) for j < K, 0 up to ldq.
__global__ void w4_prep_kernel(const bf16* __restrict__ x, int64_t k, int64_t ldq,
                               const int32_t* __restrict__ perm, const float* __restrict__ is,
                               bf16* __restrict__ xp, bool mma_order, int* __restrict__ zero,
                               int nzero) {
  pdl_wait();  // launched early (act_prep_launch_early): x comes from the kernel before
  pdl_trigger();
  const int64_t r = blockIdx.y;
  if (r == 0 && blockIdx.x == 0)
    for (int i = threadIdx.x; i < nzero; i += blockDim.x) zero[i] = 0;
  for (int64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < ldq; j += gridDim.x * blockDim.x) {
    int64_t jj = j;  // the channel position j takes
    if (mma_order) {
      const int d = static_cast<int>(j % 64) / 2, t = d & 3, e = (d >> 2) & 1, h = d >> 3;
      jj = j - j % 64 + 2 * (8 * t + 2 * h + e) + j % 2;
    }
    float v = 0.0f;
    if (jj < k) {
      const int64_t src = perm ? perm[jj] : jj;
      v = input_scaled(__bfloat162float(x[r * k + src]), is, src);
    }
    xp[r * ldq + j] = __float2bfloat16_rn(v);
  }
}

// Per-token (row) dynamic quantization, as fake_quantize_{fp8,int8}_rows: scale and code as
// quant/activation_scale.h defines them (encode(v * (1 / scale)), round to nearest even).
// One block of 1024 threads per row; 16-byte loads when K % 8 == 0 (the second pass reads the
// row again from L1).
template <bool kInt8, bool kVec>
__global__ void __launch_bounds__(1024)
    act_quant_token_kernel(const bf16* __restrict__ x, int64_t k, int64_t ldq,
                           const float* __restrict__ is, uint8_t* __restrict__ q,
                           float* __restrict__ sx) {
  __shared__ float scratch[32];
  pdl_wait();  // launched early (act_prep_launch_early): x comes from the kernel before
  pdl_trigger();
  const int64_t r = blockIdx.x;
  const bf16* xr = x + r * k;
  float amax = 0.0f;
  if constexpr (kVec) {
    for (int64_t i = threadIdx.x * 8; i < k; i += blockDim.x * 8) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(xr + i));
      const bf16* e = reinterpret_cast<const bf16*>(&v);
#pragma unroll
      for (int h = 0; h < 8; ++h) {
        const float f = input_scaled(__bfloat162float(e[h]), is, i + h);
        amax = fmaxf(amax, fabsf(f));
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) {
      const float v = input_scaled(__bfloat162float(xr[i]), is, i);
      amax = fmaxf(amax, fabsf(v));
    }
  }
  amax = block_max(amax, scratch);
  const float s = activation_scale(amax, kInt8 ? 127.0f : 448.0f), inv = __frcp_rn(s);
  if constexpr (kVec) {  // k % 8 == 0 and ldq % 64 == 0: 8 codes (one 8-byte store) per step
    for (int64_t i = threadIdx.x * 8; i < ldq; i += blockDim.x * 8) {
      uint8_t c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (i < k) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(xr + i));
        const bf16* e = reinterpret_cast<const bf16*>(&v);
#pragma unroll
        for (int h = 0; h < 8; ++h) {
          const float f = input_scaled(__bfloat162float(e[h]), is, i + h);
          c[h] = encode8<kInt8>(f * inv);
        }
      }
      uint2 packed;
      memcpy(&packed, c, 8);
      *reinterpret_cast<uint2*>(q + r * ldq + i) = packed;
    }
  } else {
    for (int64_t i = threadIdx.x; i < ldq; i += blockDim.x) {
      uint8_t c = 0;
      if (i < k) {
        const float v = input_scaled(__bfloat162float(xr[i]), is, i);
        c = encode8<kInt8>(v * inv);
      }
      q[r * ldq + i] = c;
    }
  }
  if (threadIdx.x == 0) sx[r] = s;
}

// Per token per group of `group` channels (FP8 block): one warp per group.
__global__ void __launch_bounds__(256)
    act_quant_group_kernel(const bf16* __restrict__ x, int64_t k, int64_t ldq, int64_t group,
                           int64_t groups, const float* __restrict__ is, uint8_t* __restrict__ q,
                           float* __restrict__ sx) {
  pdl_wait();  // launched early (act_prep_launch_early): x comes from the kernel before
  pdl_trigger();
  const int64_t r = blockIdx.y;
  const int64_t gi = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (gi >= groups) return;
  const bf16* xr = x + r * k;
  const int64_t c0 = gi * group, c1 = min(k, c0 + group);
  float amax = 0.0f;
  for (int64_t i = c0 + lane; i < c1; i += 32) {
    const float v = input_scaled(__bfloat162float(xr[i]), is, i);
    amax = fmaxf(amax, fabsf(v));
  }
  amax = warp_max(amax);
  const float s = activation_scale(amax, 448.0f), inv = __frcp_rn(s);
  const int64_t end = gi == groups - 1 ? ldq : c1;  // the last group also zeroes the padding
  for (int64_t i = c0 + lane; i < end; i += 32) {
    uint8_t c = 0;
    if (i < k) {
      const float v = input_scaled(__bfloat162float(xr[i]), is, i);
      c = encode8<false>(v * inv);
    }
    q[r * ldq + i] = c;
  }
  if (lane == 0) sx[r * groups + gi] = s;
}

// The activation preparations are launched early (PDL), as the other small decode kernels are
// (launch_pdl.cuh): each waits for the kernel before and then lets the GEMM or GEMV after it
// launch, so that one's weight copies start while the codes are made. Launched plainly, the
// GEMV launched only as this kernel ended. KITE_CUDA_ACT_PREP_PDL=0 launches them plainly (an
// A/B switch).
bool act_prep_launch_early() {
  static const bool on = pdl_for_small_kernels() && !env_switched_off("KITE_CUDA_ACT_PREP_PDL");
  return on;
}

}  // namespace

using quant_detail::ceil_div;
using quant_detail::round_up;

void launch_w4_prep(const bf16* x, int64_t m, int64_t k, int64_t ldq, const int32_t* perm,
                    const float* input_scale, bf16* xp, cudaStream_t stream, bool mma_order,
                    int* zero, int nzero) {
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(ceil_div(ldq, 256), 64)),
                  static_cast<unsigned>(m));
  launch_pdl_if(act_prep_launch_early(), w4_prep_kernel, grid, 256, 0, stream, x, k, ldq, perm,
                input_scale, xp, mma_order, zero, zero ? nzero : 0);
  KITE_CUDA_CHECK_LAUNCH();
}

void launch_act_quant_group(const bf16* x, int64_t m, int64_t k, int64_t ldq, int64_t group,
                            int64_t groups, const float* input_scale, uint8_t* q, float* sx,
                            cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(groups, 8)), static_cast<unsigned>(m));
  launch_pdl_if(act_prep_launch_early(), act_quant_group_kernel, grid, 256, 0, stream, x, k, ldq,
                group, groups, input_scale, q, sx);
  KITE_CUDA_CHECK_LAUNCH();
}

void launch_act_quant_token(bool int8, const bf16* x, int64_t m, int64_t k, int64_t ldq,
                            const float* input_scale, uint8_t* q, float* sx, cudaStream_t stream) {
  const bool vec = k % 8 == 0;
  const int threads =
      static_cast<int>(std::clamp<int64_t>(round_up(ceil_div(k, vec ? 8 : 1), 32), 32, 1024));
  const dim3 rows(static_cast<unsigned>(m));
  auto* kernel =
      int8 ? (vec ? act_quant_token_kernel<true, true> : act_quant_token_kernel<true, false>)
           : (vec ? act_quant_token_kernel<false, true> : act_quant_token_kernel<false, false>);
  launch_pdl_if(act_prep_launch_early(), kernel, rows, threads, 0, stream, x, k, ldq, input_scale,
                q, sx);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
