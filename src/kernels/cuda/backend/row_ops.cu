#include "kernels/cuda/backend/row_ops.h"

#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"

namespace kite::cuda {
namespace {

template <typename T>
__global__ void gather_rows_kernel(const T* x, const int32_t* rows, T* out, int64_t width) {
  const int64_t i = blockIdx.x;
  const T* src = x + static_cast<int64_t>(rows[i]) * width;
  T* dst = out + i * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) dst[c] = src[c];
}

template <typename TO, typename TY>
__global__ void scatter_add_kernel(TO* out, const TY* y, const int32_t* rows, const float* weights,
                                   int64_t width) {
  const int64_t i = blockIdx.x;
  const float w = weights[i];
  TO* dst = out + static_cast<int64_t>(rows[i]) * width;
  const TY* src = y + i * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    dst[c] = from_float<TO>(to_float(dst[c]) + w * to_float(src[c]));
}

template <typename TA, typename TB, typename TO>
__global__ void add_kernel(const TA* a, const TB* b, TO* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = from_float<TO>(to_float(a[i]) + (b ? to_float(b[i]) : 0.0f));
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 65536));
}

template <typename TA, typename TB>
void add_dispatch_out(const TA* a, const TB* b, Tensor& out, cudaStream_t stream) {
  const int64_t n = out.numel();
  if (out.dtype() == DType::kF32)
    add_kernel<<<grid_for(n), 256, 0, stream>>>(a, b, out.data<float>(), n);
  else
    add_kernel<<<grid_for(n), 256, 0, stream>>>(a, b, out.data<bf16>(), n);
}

template <typename TA>
void add_dispatch_b(const TA* a, const Tensor* b, Tensor& out, cudaStream_t stream) {
  if (!b || b->dtype() == DType::kF32)
    add_dispatch_out(a, b ? b->data<float>() : static_cast<const float*>(nullptr), out, stream);
  else
    add_dispatch_out(a, b->data<bf16>(), out, stream);
}

}  // namespace

void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out, cudaStream_t stream) {
  constexpr const char* kOp = "gather_rows";
  check_device_float(x, kOp, "x");
  check_device(out, x.dtype(), kOp, "out");
  check_device(rows, DType::kI32, kOp, "rows");
  const int64_t n = rows.numel();
  if (n == 0) return;
  const int64_t width = x.numel() / x.size(0);
  KITE_CUDA_OP_CHECK(out.numel() == n * width, kOp, "out must be [rows, width]");
  if (x.dtype() == DType::kF32)
    gather_rows_kernel<<<n, 256, 0, stream>>>(x.data<float>(), rows.data<int32_t>(),
                                              out.data<float>(), width);
  else
    gather_rows_kernel<<<n, 256, 0, stream>>>(x.data<bf16>(), rows.data<int32_t>(),
                                              out.data<bf16>(), width);
  KITE_CUDA_CHECK_LAUNCH();
}

void scatter_add_rows(Tensor& out, const Tensor& y, const Tensor& rows, const Tensor& weights,
                      cudaStream_t stream) {
  constexpr const char* kOp = "scatter_add_rows";
  check_device_float(out, kOp, "out");
  check_device_float(y, kOp, "y");
  check_device(rows, DType::kI32, kOp, "rows");
  check_device(weights, DType::kF32, kOp, "weights");
  const int64_t n = rows.numel();
  if (n == 0) return;
  const int64_t width = y.numel() / y.size(0);
  KITE_CUDA_OP_CHECK(y.size(0) == n && weights.numel() == n && out.numel() % width == 0, kOp,
                     "y [n, width], rows [n], weights [n]");
  const int32_t* r = rows.data<int32_t>();
  const float* w = weights.data<float>();
  if (out.dtype() == DType::kF32 && y.dtype() == DType::kBF16)
    scatter_add_kernel<<<n, 256, 0, stream>>>(out.data<float>(), y.data<bf16>(), r, w, width);
  else if (out.dtype() == DType::kF32)
    scatter_add_kernel<<<n, 256, 0, stream>>>(out.data<float>(), y.data<float>(), r, w, width);
  else if (y.dtype() == DType::kBF16)
    scatter_add_kernel<<<n, 256, 0, stream>>>(out.data<bf16>(), y.data<bf16>(), r, w, width);
  else
    throw std::invalid_argument("scatter_add_rows: BF16 out needs BF16 y");
  KITE_CUDA_CHECK_LAUNCH();
}

void add_convert(const Tensor& a, const Tensor* b, Tensor& out, cudaStream_t stream) {
  constexpr const char* kOp = "add";
  check_device_float(a, kOp, "a");
  check_device_float(out, kOp, "out");
  KITE_CUDA_OP_CHECK(a.numel() == out.numel() && (!b || b->numel() == out.numel()), kOp,
                     "a, b and out must have the same number of elements");
  if (b) check_device_float(*b, kOp, "b");
  if (out.numel() == 0) return;
  if (a.dtype() == DType::kF32)
    add_dispatch_b(a.data<float>(), b, out, stream);
  else
    add_dispatch_b(a.data<bf16>(), b, out, stream);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
