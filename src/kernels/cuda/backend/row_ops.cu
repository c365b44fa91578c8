#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/backend/row_ops.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/launch_pdl.cuh"

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

// Up to four column blocks of one source, in units of V (the widest of 16, 8, 4, 2 or 1 bytes
// that every pointer, row pitch, offset and width is a multiple of).
constexpr int kMaxCopies = 4;
template <typename V>
struct Copies {
  V* dst[kMaxCopies];
  int64_t dst_ld[kMaxCopies], dst_off[kMaxCopies], src_off[kMaxCopies], cols[kMaxCopies];
  int n;
  int64_t total;  // the blocks' widths added up: a row's work
};

// Grid (x: a row's units, y: rows, striding past 65,535). Launched early (PDL) like the other
// small kernels: src comes from the kernel before.
template <typename V>
__global__ void copy_columns_kernel(const V* src, int64_t src_ld, int64_t rows, Copies<V> c) {
  pdl_wait();
  pdl_trigger();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < c.total;
         u += stride) {
      int i = 0;
      int64_t col = u;
      while (i + 1 < c.n && col >= c.cols[i]) col -= c.cols[i++];
      c.dst[i][r * c.dst_ld[i] + c.dst_off[i] + col] = src[r * src_ld + c.src_off[i] + col];
    }
  }
}

template <typename V>
void launch_copies(const Tensor& src, std::span<const ColumnCopy> copies, int64_t rows,
                   int64_t unit, cudaStream_t stream) {
  const size_t es = dtype_size(src.dtype());
  auto units = [&](int64_t elems) { return elems * static_cast<int64_t>(es) / unit; };
  Copies<V> c{};
  for (const ColumnCopy& cc : copies) {
    c.dst[c.n] = static_cast<V*>(cc.dst->raw());
    c.dst_ld[c.n] = units(cc.dst->size(-1));
    c.dst_off[c.n] = units(cc.dst_off);
    c.src_off[c.n] = units(cc.src_off);
    c.cols[c.n] = units(cc.cols);
    c.total += c.cols[c.n++];
  }
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((c.total + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  launch_pdl_if(pdl_for_small_kernels(), copy_columns_kernel<V>, grid, kThreads, 0, stream,
                static_cast<const V*>(src.raw()), units(src.size(-1)), rows, c);
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

void copy_columns(const Tensor& src, std::span<const ColumnCopy> copies, cudaStream_t stream) {
  constexpr const char* kOp = "copy_columns";
  KITE_CUDA_OP_CHECK(src.defined() && src.dim() >= 1 && src.size(-1) > 0, kOp,
                     "src must be a tensor with columns");
  check_device(src, src.dtype(), kOp, "src");
  const int64_t sw = src.size(-1), rows = src.numel() / sw;
  const int64_t es = static_cast<int64_t>(dtype_size(src.dtype()));
  // The copy unit: the largest power of two (at most 16 bytes) dividing every address, pitch,
  // offset and width in bytes.
  uint64_t bits = 16 | reinterpret_cast<uintptr_t>(src.raw()) | static_cast<uint64_t>(sw * es);
  std::vector<ColumnCopy> live;
  for (const ColumnCopy& c : copies) {
    KITE_CUDA_OP_CHECK(c.dst != nullptr, kOp, "a copy without a destination");
    check_device(*c.dst, src.dtype(), kOp, "dst");
    const int64_t dw = c.dst->dim() >= 1 ? c.dst->size(-1) : 0;
    KITE_CUDA_OP_CHECK(dw > 0 && c.dst->numel() / dw == rows && c.cols >= 0 && c.src_off >= 0 &&
                           c.dst_off >= 0 && c.src_off + c.cols <= sw && c.dst_off + c.cols <= dw,
                       kOp,
                       "columns [" + std::to_string(c.src_off) + ", +" + std::to_string(c.cols) +
                           ") of src " + shape_to_string(src.shape()) + " into [" +
                           std::to_string(c.dst_off) + ", ...) of dst " +
                           shape_to_string(c.dst->shape()) + " do not fit");
    KITE_CUDA_OP_CHECK(!bytes_overlap(src, *c.dst), kOp, "dst must not overlap src");
    if (c.cols == 0 || rows == 0) continue;
    bits |= reinterpret_cast<uintptr_t>(c.dst->raw()) | static_cast<uint64_t>(dw * es) |
            static_cast<uint64_t>(c.dst_off * es) | static_cast<uint64_t>(c.src_off * es) |
            static_cast<uint64_t>(c.cols * es);
    live.push_back(c);
  }
  const int64_t unit = static_cast<int64_t>(bits & (~bits + 1));  // lowest set bit
  using Launch =
      void (*)(const Tensor&, std::span<const ColumnCopy>, int64_t, int64_t, cudaStream_t);
  const Launch launch = unit == 16  ? launch_copies<uint4>
                        : unit == 8 ? launch_copies<uint2>
                        : unit == 4 ? launch_copies<uint32_t>
                        : unit == 2 ? launch_copies<uint16_t>
                                    : launch_copies<uint8_t>;
  for (size_t b = 0; b < live.size(); b += kMaxCopies) {
    launch(src, {live.data() + b, std::min<size_t>(kMaxCopies, live.size() - b)}, rows, unit,
           stream);
    KITE_CUDA_CHECK_LAUNCH();
  }
}

void split_columns(const Tensor& y, std::span<Tensor* const> outs, cudaStream_t stream) {
  std::vector<ColumnCopy> copies;
  int64_t col = 0;
  for (Tensor* o : outs) {
    KITE_CUDA_OP_CHECK(o != nullptr && o->dim() >= 1, "split_columns", "an output without columns");
    copies.push_back({o, 0, col, o->size(-1)});
    col += o->size(-1);
  }
  KITE_CUDA_OP_CHECK(y.defined() && y.dim() >= 1 && col == y.size(-1), "split_columns",
                     "the outputs' widths add up to " + std::to_string(col) + ", y has " +
                         std::to_string(y.defined() && y.dim() >= 1 ? y.size(-1) : 0) + " columns");
  copy_columns(y, copies, stream);
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
