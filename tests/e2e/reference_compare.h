// Comparisons of kite outputs with reference outputs (transformers fixtures).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace kite::testing_util {

// ‖got − want‖ / ‖want‖ over n values; infinity if `got` holds a NaN or an infinity.
inline double relative_error(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    const double d = double(got[i]) - want[i];
    num += d * d;
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace kite::testing_util
