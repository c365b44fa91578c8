// Per-head GEMV for decode-size steps (head_gemv in head_linear.h): block (8 output rows,
// head h), one warp per output row streaming w[h]'s row with 16-byte loads against the step's
// few rows of x's slice for head h (from L1 after the first warp). cuBLASLt's strided-batched
// matmul spent 7-9 us on each of MLA's two 2 MB absorbed projections per layer at batch 1
// (DeepSeek-V2-Lite, KITE_CUDA_OP_TIMES), a few times what streaming 2 MB takes.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm/dot_bf16.cuh"
#include "kernels/cuda/gemm/head_linear.h"
#include "kernels/cuda/launch_pdl.cuh"

namespace kite::cuda {
namespace {

constexpr int kWarps = 8;

// x: the step's rows, head slices xw apart (x_off applied); y likewise with yw.
template <int M>
__global__ void __launch_bounds__(kWarps * 32)
    head_gemv_kernel(const bf16* __restrict__ x, int xw, const bf16* __restrict__ w, int n, int k,
                     bf16* __restrict__ y, int yw) {
  const int h = blockIdx.y, heads = gridDim.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * kWarps + warp;
  pdl_wait();
  pdl_trigger();
  if (row >= n) return;
  const int k8 = k / 8;
  const uint4* wr = reinterpret_cast<const uint4*>(w + (static_cast<int64_t>(h) * n + row) * k);
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  for (int i = lane; i < k8; i += 32) {
    const uint4 wv = __ldcs(wr + i);
#pragma unroll
    for (int m = 0; m < M; ++m)
      dot8_bf16(wv,
                __ldg(reinterpret_cast<const uint4*>(
                          x + (static_cast<int64_t>(m) * heads + h) * xw) +
                      i),
                acc[m]);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = warp_sum(acc[m]);
    if (lane == 0) y[(static_cast<int64_t>(m) * heads + h) * yw + row] = __float2bfloat16(v);
  }
}

template <int M>
void launch(const bf16* x, int64_t xw, const bf16* w, int64_t heads, int64_t n, int64_t k,
            bf16* y, int64_t yw, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + kWarps - 1) / kWarps), static_cast<unsigned>(heads));
  launch_pdl(head_gemv_kernel<M>, grid, kWarps * 32, 0, stream, x, static_cast<int>(xw), w,
             static_cast<int>(n), static_cast<int>(k), y, static_cast<int>(yw));
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool head_gemv_applies(const Tensor& x, int64_t x_off, const Tensor& w) {
  const int64_t k = w.size(2);
  return x.dtype() == DType::kBF16 && x.size(0) >= 1 && x.size(0) <= kHeadGemvMaxRows &&
         k % 8 == 0 && x.size(2) % 8 == 0 && x_off % 8 == 0 && all_aligned(16, x.raw(), w.raw()) &&
         w.size(0) <= 65535 && w.size(1) < (int64_t{1} << 30) && x.size(2) < (int64_t{1} << 30);
}

void head_gemv(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y, int64_t y_off,
               cudaStream_t stream) {
  const int64_t t = x.size(0), heads = w.size(0), n = w.size(1), k = w.size(2);
  const auto* xp = static_cast<const bf16*>(x.raw()) + x_off;
  auto* yp = static_cast<bf16*>(y.raw()) + y_off;
  const auto* wp = static_cast<const bf16*>(w.raw());
  switch (t) {
    case 1: return launch<1>(xp, x.size(2), wp, heads, n, k, yp, y.size(2), stream);
    case 2: return launch<2>(xp, x.size(2), wp, heads, n, k, yp, y.size(2), stream);
    case 3: return launch<3>(xp, x.size(2), wp, heads, n, k, yp, y.size(2), stream);
    default: return launch<4>(xp, x.size(2), wp, heads, n, k, yp, y.size(2), stream);
  }
}

}  // namespace kite::cuda
