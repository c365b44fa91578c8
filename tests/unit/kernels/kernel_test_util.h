// Shared helpers for the CPU kernel tests: seeded random tensors, NaN poisoning, and a
// comparison that reports the first mismatch and fails on any NaN.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "core/tensor.h"

namespace kite::testing {

// Uniform values in [lo, hi): never all zeros, and reproducible from the seed.
inline Tensor random_tensor(const Shape& shape, std::mt19937& rng, float lo = -1.0f,
                            float hi = 1.0f) {
  Tensor t = Tensor::empty(shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.f32()) v = dist(rng);
  return t;
}

inline void poison(Tensor& t) {
  for (float& v : t.f32()) v = std::numeric_limits<float>::quiet_NaN();
}

inline Tensor poisoned(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  poison(t);
  return t;
}

// Passes when every actual[i] is finite and |actual[i] - expected[i]| <= atol[i] + rtol *
// |expected[i]|, where atol is a scalar or per element (pass an empty vector for scalar).
inline ::testing::AssertionResult all_close(std::span<const float> actual,
                                            const std::vector<double>& expected, double rtol,
                                            double atol,
                                            const std::vector<double>& atol_each = {}) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  }
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tol = (atol_each.empty() ? atol : atol_each[i]) + rtol * std::fabs(expected[i]);
    const bool ok = std::isfinite(actual[i]) && std::fabs(actual[i] - expected[i]) <= tol;
    if (!ok && bad++ == 0) {
      first << "first mismatch at " << i << ": got " << actual[i] << ", want " << expected[i]
            << " (tol " << tol << ")";
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << actual.size() << " differ; " << first.str();
}

inline std::vector<double> to_double(std::span<const float> v) { return {v.begin(), v.end()}; }

}  // namespace kite::testing
