// W4A16 -> BF16 weight expansion (w4_dequant.h). One thread per 16-byte lane word of the
// layout: it holds rows g and g + 8 of a 16-row tile, channels 16t..16t+15 of a 64-channel
// chunk (g = lane / 4, t = lane % 4), with the fragment order of quant_linear.cu's W4 MMA:
// word h, nibbles at bits 0/16/8/24 -> row g, channels 16t + 4h + 0/1/2/3; bits 4/20/12/28 ->
// row g + 8, the same channels.
#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant/w4_dequant.h"

namespace kite::cuda {
namespace {

// One 16-row tile per blockIdx.y (tile0 + y), its chunk words along x: the tile, chunk and lane
// come from the grid and the group from a shift where chunks_per_group is a power of two (group
// 128: 2). A grid-stride form that took them from the word index by three 64-bit divisions a
// word made a Llama-3-8B 512-token W4A16 prefill 2.3 ms slower (21.5 against 19.2 ms, BF16 13.1;
// BENCHMARKS.md run 25).
__global__ void w4_dequant_kernel(const uint4* __restrict__ codes, const float* __restrict__ scales,
                                  const uint8_t* __restrict__ zeros, int n_pad, int k_pad,
                                  int nchunks, int cpg, int cpg_shift, int tile0,
                                  bf16* __restrict__ w) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;  // word within the tile
  const int c = j >> 5;
  if (c >= nchunks) return;
  const int lane = j & 31, tile = tile0 + static_cast<int>(blockIdx.y);
  const int g = lane >> 2, t = lane & 3;
  const int r0 = tile * 16 + g, r1 = r0 + 8;
  const int64_t so = static_cast<int64_t>(cpg_shift >= 0 ? c >> cpg_shift : c / cpg) * n_pad;
  const float s0 = scales[so + r0], s1 = scales[so + r1];
  const float z0 = zeros[so + r0], z1 = zeros[so + r1];
  const uint4 v = codes[static_cast<int64_t>(tile) * nchunks * 32 + j];
  const uint32_t q[4] = {v.x, v.y, v.z, v.w};
  const int col0 = c * 64 + 16 * t;
  // Channel 16t + 4h + i of row r0 comes from word h at shift kShift[i] (r1: + 4); each row's
  // 16 channels are assembled in registers and stored as two 16-byte writes (the 4 lanes of a
  // row group then write its 128 contiguous bytes).
  constexpr int kShift[4] = {0, 16, 8, 24};
  __align__(16) bf16 a[16], b[16];
#pragma unroll
  for (int h = 0; h < 4; ++h)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a[4 * h + i] = __float2bfloat16((static_cast<float>((q[h] >> kShift[i]) & 0xF) - z0) * s0);
      b[4 * h + i] =
          __float2bfloat16((static_cast<float>((q[h] >> (kShift[i] + 4)) & 0xF) - z1) * s1);
    }
  uint4* w0 = reinterpret_cast<uint4*>(w + static_cast<int64_t>(r0) * k_pad + col0);
  uint4* w1 = reinterpret_cast<uint4*>(w + static_cast<int64_t>(r1) * k_pad + col0);
  w0[0] = reinterpret_cast<const uint4*>(a)[0];
  w0[1] = reinterpret_cast<const uint4*>(a)[1];
  w1[0] = reinterpret_cast<const uint4*>(b)[0];
  w1[1] = reinterpret_cast<const uint4*>(b)[1];
}

}  // namespace

void launch_w4_dequant(const uint8_t* codes, const float* scales, const uint8_t* zeros,
                       int64_t n_pad, int64_t k_pad, int64_t chunks_per_group, bf16* w,
                       cudaStream_t stream) {
  const int64_t nchunks = k_pad / 64, tiles = n_pad / 16;
  if (nchunks == 0 || tiles == 0) return;
  if (n_pad >= (int64_t{1} << 30) || k_pad >= (int64_t{1} << 30))
    throw std::invalid_argument("w4 dequant: a dimension of 2^30 or more");
  const int cpg = static_cast<int>(chunks_per_group);
  const int shift = (cpg & (cpg - 1)) == 0 ? __builtin_ctz(static_cast<unsigned>(cpg)) : -1;
  constexpr int64_t kMaxTilesPerLaunch = 65535;  // grid.y
  for (int64_t t0 = 0; t0 < tiles; t0 += kMaxTilesPerLaunch) {
    const dim3 grid(static_cast<unsigned>((nchunks * 32 + 255) / 256),
                    static_cast<unsigned>(std::min(kMaxTilesPerLaunch, tiles - t0)));
    w4_dequant_kernel<<<grid, 256, 0, stream>>>(
        reinterpret_cast<const uint4*>(codes), scales, zeros, static_cast<int>(n_pad),
        static_cast<int>(k_pad), static_cast<int>(nchunks), cpg, shift, static_cast<int>(t0), w);
    KITE_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace kite::cuda
