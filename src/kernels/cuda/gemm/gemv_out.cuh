// Where a decode GEMV's output feature goes, shared by the GEMV kernels (gemv.cu, gemv_bulk.cu).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/gemv.h"

namespace kite::cuda {

// Segment s owns output features [begin[s], begin[s+1]) and writes them to its own
// [M, begin[s+1] - begin[s]] tensor (q, k and v from one stacked W).
template <typename TOut>
struct OutSegments {
  TOut* y[kGemvMaxSegments];
  int64_t begin[kGemvMaxSegments + 1];
  int count;
};

// Writes feature `row` of all M rows (acc[m] + bias) to its segment.
template <int M, typename TOut>
__device__ __forceinline__ void write_feature(const OutSegments<TOut>& out, const TOut* bias,
                                              int64_t row, const float (&acc)[M]) {
  const float b = bias ? to_float(bias[row]) : 0.0f;
  int s = 0;
  while (s + 1 < out.count && row >= out.begin[s + 1]) ++s;
  const int64_t width = out.begin[s + 1] - out.begin[s], col = row - out.begin[s];
  TOut* y = out.y[s];
#pragma unroll
  for (int m = 0; m < M; ++m) y[m * width + col] = from_float<TOut>(acc[m] + b);
}

// Calls f(std::integral_constant<int, M>{}) for the run-time row count m in [1, MAX_M]: the one
// place the decode GEMV launchers (the dense, per-head and rope-side ones) turn M into a
// template argument.
template <int MAX_M = kGemvMaxRows, typename F>
void with_rows(int64_t m, F&& f) {
  bool called = false;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((m == I + 1 ? (f(std::integral_constant<int, I + 1>{}), called = true) : false), ...);
  }(std::make_integer_sequence<int, MAX_M>{});
  if (!called)
    throw std::invalid_argument("gemv: M must be in [1, " + std::to_string(MAX_M) + "]");
}

// The bulk-copy kernel (gemv_bulk.cu); `gated`: W = [gate; up] and out.y[0] [M, n / 2] gets
// silu(gate) * up (no bias).
template <typename TOut>
void launch_gemv_bulk(const bf16* x, const bf16* w, const TOut* bias, const OutSegments<TOut>& out,
                      int64_t m, int64_t n, int64_t k, bool gated, cudaStream_t stream);

}  // namespace kite::cuda
