// Activation preparation for the quantized linears (quant_activation.cu), launched on `stream`
// before the GEMM kernels of quant_linear.cu read its output. Rows: m; x is [m, k] BF16; the
// outputs are [m, ldq] with zeros past k (ldq = the weight's padded K).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kite::cuda {

// W4A16: xp[r, j] = bf16(x[r, perm[j]] * input_scale[perm[j]]) (perm / input_scale optional).
// mma_order: each 64-channel chunk's channels reordered to the W4 codes' k order (the wgmma
// GEMM's B operand, quant_w4_wgmma.cu): position 2d + b holds channel 2w + b, with d = 8h + 4e
// + t the k-word of channel pair w = 8t + 2h + e.
// zero: `nzero` ints set to 0 on the way (the wgmma GEMM's split-K counters), or null.
void launch_w4_prep(const __nv_bfloat16* x, int64_t m, int64_t k, int64_t ldq, const int32_t* perm,
                    const float* input_scale, __nv_bfloat16* xp, cudaStream_t stream,
                    bool mma_order = false, int* zero = nullptr, int nzero = 0);
// FP8 block: per token per group of `group` channels, sx [m, groups] = amax / 448, q = FP8 codes.
void launch_act_quant_group(const __nv_bfloat16* x, int64_t m, int64_t k, int64_t ldq,
                            int64_t group, int64_t groups, const float* input_scale, uint8_t* q,
                            float* sx, cudaStream_t stream);
// FP8 / INT8 per token: sx [m] = amax / 448 (or / 127), q = codes of x / sx.
void launch_act_quant_token(bool int8, const __nv_bfloat16* x, int64_t m, int64_t k, int64_t ldq,
                            const float* input_scale, uint8_t* q, float* sx, cudaStream_t stream);

}  // namespace kite::cuda
