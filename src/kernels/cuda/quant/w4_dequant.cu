// W4A16 -> BF16 weight expansion (w4_dequant.h). The layout's 16-byte lane word holds rows g
// and g + 8 of a 16-row tile, channels 16t..16t+15 of a 64-channel chunk (g = lane / 4,
// t = lane % 4), with the fragment order of quant_linear.cu's W4 MMA: word h, nibbles at bits
// 0/16/8/24 -> row g, channels 16t + 4h + 0/1/2/3; bits 4/20/12/28 -> row g + 8, the same
// channels. So the 8-byte half u % 2 of lane 4g + u / 2's word holds channels 8u..8u+7.
#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant/w4_dequant.h"

namespace kite::cuda {
namespace {

// One 16-row tile per blockIdx.y (tile0 + y), its pieces along x: the tile, chunk, row group and
// piece come from the grid and the group from a shift where chunks_per_group is a power of two
// (group 128: 2). A grid-stride form that took them from the word index by three 64-bit
// divisions a word made a Llama-3-8B 512-token W4A16 prefill 2.3 ms slower (21.5 against
// 19.2 ms, BF16 13.1; BENCHMARKS.md run 25).
// Each thread expands one 8-byte piece u of row group g: channels 8u..8u+7 of rows g and g + 8,
// so a row's 8 threads store its chunk's 128 bytes whole, one 16-byte store each. A thread per
// lane word (a row's 4 threads storing 32 bytes each as two 16-byte halves, so each store wrote
// every other 16 bytes: half of each 32-byte sector) took 212.6 µs a layer of Llama-3-8B against
// 196.3 (H100, BENCHMARKS.md run 38).
__global__ void w4_dequant_kernel(const uint2* __restrict__ codes, const float* __restrict__ scales,
                                  const uint8_t* __restrict__ zeros, int n_pad, int k_pad,
                                  int nchunks, int cpg, int cpg_shift, int tile0,
                                  bf16* __restrict__ w) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;  // piece within the tile: chunk, g, u
  const int c = j >> 6;
  if (c >= nchunks) return;
  const int g = (j >> 3) & 7, u = j & 7, tile = tile0 + static_cast<int>(blockIdx.y);
  const int r0 = tile * 16 + g, r1 = r0 + 8;
  const int64_t so = static_cast<int64_t>(cpg_shift >= 0 ? c >> cpg_shift : c / cpg) * n_pad;
  const float s0 = scales[so + r0], s1 = scales[so + r1];
  const float z0 = zeros[so + r0], z1 = zeros[so + r1];
  const uint2 v =
      codes[((static_cast<int64_t>(tile) * nchunks + c) * 32 + 4 * g + (u >> 1)) * 2 + (u & 1)];
  const uint32_t q[2] = {v.x, v.y};
  constexpr int kShift[4] = {0, 16, 8, 24};
  __align__(16) bf16 a[8], b[8];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a[4 * h + i] = __float2bfloat16((static_cast<float>((q[h] >> kShift[i]) & 0xF) - z0) * s0);
      b[4 * h + i] =
          __float2bfloat16((static_cast<float>((q[h] >> (kShift[i] + 4)) & 0xF) - z1) * s1);
    }
  const int col = c * 64 + 8 * u;
  *reinterpret_cast<uint4*>(w + static_cast<int64_t>(r0) * k_pad + col) =
      *reinterpret_cast<const uint4*>(a);
  *reinterpret_cast<uint4*>(w + static_cast<int64_t>(r1) * k_pad + col) =
      *reinterpret_cast<const uint4*>(b);
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
    const dim3 grid(static_cast<unsigned>((nchunks * 64 + 255) / 256),
                    static_cast<unsigned>(std::min(kMaxTilesPerLaunch, tiles - t0)));
    w4_dequant_kernel<<<grid, 256, 0, stream>>>(
        reinterpret_cast<const uint2*>(codes), scales, zeros, static_cast<int>(n_pad),
        static_cast<int>(k_pad), static_cast<int>(nchunks), cpg, shift, static_cast<int>(t0), w);
    KITE_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace kite::cuda
