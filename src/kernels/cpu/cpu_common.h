// Helpers shared by the CPU kernels: shape checks that throw std::invalid_argument with the op
// name and the offending shapes, small AVX2 building blocks (dot, sum of squares) and a row's
// softmax.
//
// The vector helpers exist because GCC at -O2 without -ffast-math will not vectorise float
// reductions (it may not reorder additions); explicit lanes keep them fast and deterministic
// for a given length (the summation order depends only on n, never on threads or alignment).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/tensor.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KITE_CPU_AVX2 1
#endif

// Throws std::invalid_argument("<op>: <message>") when `cond` is false. The message
// expression is evaluated only on failure, so checks stay free on the hot path.
#define KITE_OP_CHECK(cond, op, message)                                          \
  do {                                                                            \
    if (!(cond)) throw std::invalid_argument(std::string(op) + ": " + (message)); \
  } while (0)

namespace kite::ops::cpu {

// Requires a defined, host, fp32 tensor; the CPU backend computes in fp32 only.
inline void check_f32(const Tensor& t, const char* op, const char* name) {
  KITE_OP_CHECK(t.defined() || t.numel() == 0, op, std::string(name) + " is undefined");
  KITE_OP_CHECK(t.dtype() == DType::kF32, op,
                std::string(name) + " must be F32, got " + std::string(dtype_name(t.dtype())));
  KITE_OP_CHECK(t.device() == Device::kCpu, op, std::string(name) + " must be a host tensor");
}

inline std::string shape_of(const Tensor& t) { return shape_to_string(t.shape()); }

// Rows of `t` when viewed as [rows, width]; throws unless the last dim equals `width`.
inline int64_t rows_with_width(const Tensor& t, int64_t width, const char* op, const char* name) {
  KITE_OP_CHECK(
      t.dim() >= 1 && t.size(-1) == width, op,
      std::string(name) + " " + shape_of(t) + " must have last dim " + std::to_string(width));
  return width == 0 ? 0 : t.numel() / width;
}

#ifdef KITE_CPU_AVX2
inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}
#endif

// sum_i a[i] * b[i] in fp32 with four independent 8-lane accumulators.
inline float dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float sum = 0.0f;
#ifdef KITE_CPU_AVX2
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// sum_i x[i]^2 accumulated in double, so a long row of large activations loses no precision
// before the fp32 mean that torch computes (its fp32 reduction is itself pairwise-accurate).
inline double sum_squares_f64(const float* x, int64_t n) {
  int64_t i = 0;
  double sum = 0.0;
#ifdef KITE_CPU_AVX2
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  for (; i + 8 <= n; i += 8) {
    __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    __m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    acc0 = _mm256_fmadd_pd(lo, lo, acc0);
    acc1 = _mm256_fmadd_pd(hi, hi, acc1);
  }
  __m256d acc = _mm256_add_pd(acc0, acc1);
  __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
  sum = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
#endif
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// True when the byte ranges of two tensors overlap (used to reject illegal aliasing).
inline bool overlaps(const Tensor& a, const Tensor& b) {
  auto* a0 = static_cast<const char*>(a.raw());
  auto* b0 = static_cast<const char*>(b.raw());
  if (!a0 || !b0 || a.size_bytes() == 0 || b.size_bytes() == 0) return false;
  return a0 < b0 + b.size_bytes() && b0 < a0 + a.size_bytes();
}

// out[j] = exp(in[j] - max) / sum_i exp(in[i] - max) over n values (the max taken out for
// range, the sum in double); `in` may be `out`.
inline void softmax_row(const float* in, float* out, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) max = in[j] > max ? in[j] : max;
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    out[j] = std::exp(in[j] - max);
    sum += out[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) out[j] *= inv;
}

// Work below this many scalar operations runs on one thread: forking the OpenMP team costs
// a few microseconds, more than the work itself.
inline constexpr int64_t kParallelMinWork = 1 << 15;

// A matrix product (BLAS or the quantized linear's row dots) below this many multiply-adds runs
// on one thread. Measured on the 2-core dev machine (docs/BENCHMARKS.md, "CPU decode"):
// kite-tiny's decode GEMVs (at most 393 K: layer 0's stacked gate_up) made its decode 3.7x
// faster on one thread, while Qwen2.5-0.5B's q and o GEMVs (803 K) cost its decode 7 % on one.
inline constexpr int64_t kParallelMinMadds = int64_t{1} << 19;

}  // namespace kite::ops::cpu
