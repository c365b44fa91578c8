#include "core/vec_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KITE_VEC_AVX2 1
#endif

namespace kite::vec {
namespace {

constexpr float kExpMinArg = -87.33654f;  // ln(FLT_MIN): below it exp returns 0

#ifdef KITE_VEC_AVX2
// Cephes expf: exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln(2) / 2, with ln 2 split
// in two constants so r keeps full precision. Arguments here are <= 0.
inline __m256 exp8(__m256 x) {
  const __m256 zero_mask = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMinArg), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(kExpMinArg));
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i n = _mm256_cvtps_epi32(fx);
  const __m256 pow2n =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  return _mm256_andnot_ps(zero_mask, _mm256_mul_ps(y, pow2n));
}

inline void add_to(__m256d& lo, __m256d& hi, __m256 v) {
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

inline double horizontal_sum(__m256d lo, __m256d hi) {
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(lo, hi));
  return (t[0] + t[1]) + (t[2] + t[3]);
}
#endif

inline float exp1(float x) { return x < kExpMinArg ? 0.0f : std::exp(x); }

// Weights of x[begin, end), written to w (if non-null); returns their sum.
double exp_range(const float* x, size_t begin, size_t end, float shift, float scale, float* w) {
  size_t i = begin;
  double sum = 0.0;
#ifdef KITE_VEC_AVX2
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  const __m256 vshift = _mm256_set1_ps(shift), vscale = _mm256_set1_ps(scale);
  for (; i + 8 <= end; i += 8) {
    const __m256 e = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift), vscale));
    if (w != nullptr) _mm256_storeu_ps(w + i, e);
    add_to(lo, hi, e);
  }
  sum = horizontal_sum(lo, hi);
#endif
  for (; i < end; ++i) {
    const float e = exp1((x[i] - shift) * scale);
    if (w != nullptr) w[i] = e;
    sum += e;
  }
  return sum;
}

}  // namespace

RowMax row_max(std::span<const float> x) {
  float m = -std::numeric_limits<float>::infinity();
  bool bad = false;
  size_t i = 0;
#ifdef KITE_VEC_AVX2
  __m256 vm = _mm256_set1_ps(m);
  __m256 vbad = _mm256_setzero_ps();
  for (; i + 8 <= x.size(); i += 8) {
    const __m256 v = _mm256_loadu_ps(x.data() + i);
    vbad = _mm256_or_ps(vbad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    vm = _mm256_max_ps(v, vm);  // NaN in v yields vm: NaN is caught by vbad instead
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, vm);
  for (float v : t) m = std::max(m, v);
  bad = _mm256_movemask_ps(vbad) != 0;
#endif
  for (; i < x.size(); ++i) {
    bad |= std::isnan(x[i]);
    if (x[i] > m) m = x[i];
  }
  bad |= m == std::numeric_limits<float>::infinity();
  return {m, bad};
}

size_t first_index_of(std::span<const float> x, float value) {
  size_t i = 0;
#ifdef KITE_VEC_AVX2
  const __m256 vv = _mm256_set1_ps(value);
  for (; i + 8 <= x.size(); i += 8) {
    const int mask =
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x.data() + i), vv, _CMP_EQ_OQ));
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  for (; i < x.size(); ++i) {
    if (x[i] == value) return i;
  }
  return x.size();
}

size_t next_greater(std::span<const float> x, size_t begin, float threshold) {
  size_t i = begin;
#ifdef KITE_VEC_AVX2
  const __m256 vt = _mm256_set1_ps(threshold);
  for (; i + 8 <= x.size(); i += 8) {
    const int mask =
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x.data() + i), vt, _CMP_GT_OQ));
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  for (; i < x.size(); ++i) {
    if (x[i] > threshold) return i;
  }
  return x.size();
}

double sum_exp(std::span<const float> x, float shift, float scale) {
  return exp_range(x.data(), 0, x.size(), shift, scale, nullptr);
}

double exp_shifted_in_place(std::span<float> x, float shift) {
  return exp_range(x.data(), 0, x.size(), shift, 1.0f, x.data());
}

double exp_weights(std::span<const float> x, float shift, float scale, std::span<float> weights,
                   std::vector<double>& block_sums) {
  const size_t n = x.size();
  block_sums.resize((n + kWeightBlock - 1) / kWeightBlock);
  double total = 0.0;
  for (size_t b = 0; b < block_sums.size(); ++b) {
    const size_t begin = b * kWeightBlock, end = std::min(n, begin + kWeightBlock);
    block_sums[b] = exp_range(x.data(), begin, end, shift, scale, weights.data());
    total += block_sums[b];
  }
  return total;
}

size_t draw_index(std::span<const float> weights, const std::vector<double>& block_sums,
                  double target) {
  double cum = 0.0;
  for (size_t b = 0; b < block_sums.size(); ++b) {
    if (target >= cum + block_sums[b]) {
      cum += block_sums[b];
      continue;
    }
    const size_t begin = b * kWeightBlock, end = std::min(weights.size(), begin + kWeightBlock);
    for (size_t i = begin; i < end; ++i) {
      cum += weights[i];
      if (target < cum && weights[i] > 0.0f) return i;
    }
    // The block's sum said the target is inside it; rounding disagreed. Fall through.
  }
  for (size_t i = weights.size(); i > 0; --i) {
    if (weights[i - 1] > 0.0f) return i - 1;
  }
  return 0;  // unreachable for a row with a finite maximum
}

}  // namespace kite::vec
