// W4A16 weights expanded to BF16 for many rows (prefill): quantized_linear (quant_linear.h)
// takes this route above kW4DequantMinRows, then one cuBLASLt BF16 GEMM. The tensor-core
// kernel re-streams the weight once per 64 rows, which made a 512-token W4A16 prefill of the
// Llama-3-8B shape 5x slower than BF16 (BENCHMARKS.md, run 6); the expansion costs one pass
// over the weight (read 0.54, write 2 bytes per parameter) and rounds each (q - zero) * scale
// to BF16, as the dequantize-then-GEMM paths of other engines do.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kite::cuda {

// w[n_pad, k_pad] = bf16((q - zero[g, r]) * scale[g, r]) from the kInt4Group device layout
// (quant_linear.h: codes [n_pad/16, k_pad/64, 32 lanes, 16 bytes] in MMA fragment order,
// scales F32 / zeros U8 [groups, n_pad], group g = chunk / chunks_per_group), channels in the
// packed order (x gathered through perm, as the kernels read it).
void launch_w4_dequant(const uint8_t* codes, const float* scales, const uint8_t* zeros,
                       int64_t n_pad, int64_t k_pad, int64_t chunks_per_group, __nv_bfloat16* w,
                       cudaStream_t stream);

}  // namespace kite::cuda
