// Per-head linear through cuBLASLt strided-batched matmul: for every head h and row t,
//   y[t, h, y_off : y_off+N] = x[t, h, x_off : x_off+K] · w[h]^T
// with x [T, H, x_width], w [H, N, K], y [T, H, y_width], all BF16 (or all F32), fp32
// accumulation. One launch for all heads (MLA's absorbed W_UK / W_UV projections), reading the
// strided slices in place. Plans are cached by shape, strides and alignment. Decode-size BF16
// steps (head_gemv_applies) run head_gemv instead.
#pragma once

#include <map>
#include <memory>
#include <tuple>

#include "kernels/cuda/gemm/blaslt.h"

namespace kite::cuda {

class HeadLinear {
 public:
  HeadLinear();
  ~HeadLinear();
  HeadLinear(const HeadLinear&) = delete;
  HeadLinear& operator=(const HeadLinear&) = delete;

  void run(BlasLtContext& ctx, const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y,
           int64_t y_off, cudaStream_t stream);

 private:
  using Plan = LtMatmulPlan;
  // t, heads, n, k, x_width, y_width, dtype, alignment of x, w, y
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int>;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

// Checks a head_linear call's tensors (HeadLinear::run does, and rope_and_cache for the product
// it runs in its launch): device tensors of one float dtype, x [T, H, x_width], w [H, N, K],
// y [T, H, y_width], the column ranges inside the rows.
void check_head_linear(const Tensor& x, int64_t x_off, const Tensor& w, const Tensor& y,
                       int64_t y_off);

// The same for BF16 and at most kHeadGemvMaxRows rows of x, as one GEMV launch
// (head_gemv.cu); head_gemv_applies says when its alignment needs hold (K, x's width and x_off
// multiples of 8, x and w 16-byte aligned). Shapes are checked by HeadLinear::run.
inline constexpr int64_t kHeadGemvMaxRows = 4;
bool head_gemv_applies(const Tensor& x, int64_t x_off, const Tensor& w);
void head_gemv(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y, int64_t y_off,
               cudaStream_t stream);

}  // namespace kite::cuda
