// Per-head GEMV for decode-size steps (head_gemv in head_linear.h): block (8 output rows,
// head h), one warp per output row streaming w[h]'s row with 16-byte loads against the step's
// few rows of x's slice for head h (from L1 after the first warp). cuBLASLt's strided-batched
// matmul spent 7-9 us on each of MLA's two 2 MB absorbed projections per layer at batch 1
// (DeepSeek-V2-Lite, KITE_CUDA_OP_TIMES), a few times what streaming 2 MB takes.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm/gemv_out.cuh"
#include "kernels/cuda/gemm/head_gemv.cuh"
#include "kernels/cuda/gemm/head_linear.h"
#include "kernels/cuda/launch_pdl.cuh"

namespace kite::cuda {
namespace {

// Block (8 output rows, head h): head_gemv_block (head_gemv.cuh) for M = a.rows rows (one
// instantiation each: a run-time M took 60 registers a thread against 34-44).
template <int M>
__global__ void __launch_bounds__(kHeadGemvWarps * 32) head_gemv_kernel(const HeadGemvArgs a) {
  head_gemv_block<M>(a, blockIdx.x, blockIdx.y, [] {
    pdl_wait();
    pdl_trigger();
  });
}

}  // namespace

HeadGemvArgs head_gemv_args(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y,
                            int64_t y_off) {
  HeadGemvArgs a;
  a.x = static_cast<const bf16*>(x.raw()) + x_off;
  a.w = static_cast<const bf16*>(w.raw());
  a.y = static_cast<bf16*>(y.raw()) + y_off;
  a.xw = static_cast<int>(x.size(2));
  a.yw = static_cast<int>(y.size(2));
  a.heads = static_cast<int>(w.size(0));
  a.n = static_cast<int>(w.size(1));
  a.k = static_cast<int>(w.size(2));
  a.rows = static_cast<int>(x.size(0));
  return a;
}

int head_gemv_blocks_per_head(const HeadGemvArgs& a) {
  return (a.n + kHeadGemvWarps - 1) / kHeadGemvWarps;
}

bool head_gemv_applies(const Tensor& x, int64_t x_off, const Tensor& w) {
  const int64_t k = w.size(2);
  return x.dtype() == DType::kBF16 && x.size(0) >= 1 && x.size(0) <= kHeadGemvMaxRows &&
         k % 8 == 0 && x.size(2) % 8 == 0 && x_off % 8 == 0 && all_aligned(16, x.raw(), w.raw()) &&
         w.size(0) <= 65535 && w.size(1) < (int64_t{1} << 30) && x.size(2) < (int64_t{1} << 30);
}

void head_gemv(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y, int64_t y_off,
               cudaStream_t stream) {
  const HeadGemvArgs a = head_gemv_args(x, x_off, w, y, y_off);
  const dim3 grid(static_cast<unsigned>(head_gemv_blocks_per_head(a)),
                  static_cast<unsigned>(a.heads));
  with_rows<kHeadGemvMaxRows>(a.rows, [&](auto rows) {
    launch_pdl(head_gemv_kernel<decltype(rows)::value>, grid, kHeadGemvWarps * 32, 0, stream, a);
  });
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
