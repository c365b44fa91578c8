// The epilogue of the per-tensor FP8 and the INT8 GEMM routes (fp8_gemm_lt.h): row and column
// scales, bias.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant/fp8_gemm_lt.h"

namespace kite::cuda {
namespace {

template <typename Acc, typename TOut>
__global__ void scale_kernel(const Acc* __restrict__ acc, const float* __restrict__ xs,
                             const float* __restrict__ ws, const bf16* __restrict__ bias,
                             TOut* __restrict__ y, int64_t n) {
  const int64_t row = blockIdx.y;
  const float sx = xs[row];
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < n;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = static_cast<float>(acc[row * n + c]) * sx * ws[c];
    if (bias) v += __bfloat162float(bias[c]);
    y[row * n + c] = from_float<TOut>(v);
  }
}

template <typename Acc>
void launch_scale(const Acc* acc, const float* x_scale, const float* w_scale, const Tensor* bias,
                  Tensor& y, int64_t m, int64_t n, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 64));
  const dim3 grid(blocks, static_cast<unsigned>(m));
  const bf16* b = bias ? static_cast<const bf16*>(bias->raw()) : nullptr;
  if (y.dtype() == DType::kF32)
    scale_kernel<<<grid, 256, 0, stream>>>(acc, x_scale, w_scale, b, y.data<float>(), n);
  else
    scale_kernel<<<grid, 256, 0, stream>>>(acc, x_scale, w_scale, b, static_cast<bf16*>(y.raw()),
                                           n);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void scale_rows_cols(const float* acc, const float* x_scale, const float* w_scale,
                     const Tensor* bias, Tensor& y, int64_t m, int64_t n, cudaStream_t stream) {
  launch_scale(acc, x_scale, w_scale, bias, y, m, n, stream);
}
void scale_rows_cols(const int32_t* acc, const float* x_scale, const float* w_scale,
                     const Tensor* bias, Tensor& y, int64_t m, int64_t n, cudaStream_t stream) {
  launch_scale(acc, x_scale, w_scale, bias, y, m, n, stream);
}

}  // namespace kite::cuda
