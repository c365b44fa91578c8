// W4A16 -> BF16 weight expansion (w4_dequant.h). One thread per 16-byte lane word of the
// layout: it holds rows g and g + 8 of a 16-row tile, channels 16t..16t+15 of a 64-channel
// chunk (g = lane / 4, t = lane % 4), with the fragment order of quant_linear.cu's W4 MMA:
// word h, nibbles at bits 0/16/8/24 -> row g, channels 16t + 4h + 0/1/2/3; bits 4/20/12/28 ->
// row g + 8, the same channels.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant/w4_dequant.h"
#include "kernels/cuda/stream.h"

namespace kite::cuda {
namespace {

__global__ void w4_dequant_kernel(const uint4* __restrict__ codes, const float* __restrict__ scales,
                                  const uint8_t* __restrict__ zeros, int64_t n_pad, int64_t k_pad,
                                  int64_t nchunks, int64_t cpg, bf16* __restrict__ w) {
  const int64_t words = n_pad / 16 * nchunks * 32;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int lane = static_cast<int>(i % 32);
    const int64_t c = (i / 32) % nchunks, tile = i / 32 / nchunks;
    const int g = lane >> 2, t = lane & 3;
    const int64_t r0 = tile * 16 + g, r1 = r0 + 8;
    const int64_t so = c / cpg * n_pad;
    const float s0 = scales[so + r0], s1 = scales[so + r1];
    const float z0 = zeros[so + r0], z1 = zeros[so + r1];
    const uint4 v = codes[i];
    const uint32_t q[4] = {v.x, v.y, v.z, v.w};
    const int64_t col0 = c * 64 + 16 * t;
    // Channel 16t + 4h + j of row r0 comes from word h at shift kShift[j] (r1: + 4); each row's
    // 16 channels are assembled in registers and stored as two 16-byte writes (the 4 lanes of
    // a row group then write its 128 contiguous bytes).
    constexpr int kShift[4] = {0, 16, 8, 24};
    __align__(16) bf16 a[16], b[16];
#pragma unroll
    for (int h = 0; h < 4; ++h)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        a[4 * h + j] = __float2bfloat16((static_cast<float>((q[h] >> kShift[j]) & 0xF) - z0) * s0);
        b[4 * h + j] =
            __float2bfloat16((static_cast<float>((q[h] >> (kShift[j] + 4)) & 0xF) - z1) * s1);
      }
    uint4* w0 = reinterpret_cast<uint4*>(w + r0 * k_pad + col0);
    uint4* w1 = reinterpret_cast<uint4*>(w + r1 * k_pad + col0);
    w0[0] = reinterpret_cast<const uint4*>(a)[0];
    w0[1] = reinterpret_cast<const uint4*>(a)[1];
    w1[0] = reinterpret_cast<const uint4*>(b)[0];
    w1[1] = reinterpret_cast<const uint4*>(b)[1];
  }
}

}  // namespace

void launch_w4_dequant(const uint8_t* codes, const float* scales, const uint8_t* zeros,
                       int64_t n_pad, int64_t k_pad, int64_t chunks_per_group, bf16* w,
                       cudaStream_t stream) {
  const int64_t nchunks = k_pad / 64, words = n_pad / 16 * nchunks * 32;
  if (words == 0) return;
  const int64_t most = 16 * int64_t{device_properties().multiProcessorCount};  // grid-stride
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((words + 255) / 256, most));
  w4_dequant_kernel<<<blocks, 256, 0, stream>>>(reinterpret_cast<const uint4*>(codes), scales,
                                                zeros, n_pad, k_pad, nchunks, chunks_per_group, w);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
