// Division by a divisor fixed before a kernel starts, by one wide multiply and a shift.
//
// A 32-bit division by a runtime value costs a GPU thread some twenty instructions; the
// streaming kernels (moe_decode_bulk.cu) did several per 32 KB tile in each of 16 warps, and
// that issue time, not the copies, bounded them (BENCHMARKS.md run 12). The host builds a
// FastDivmod once per launch; it is also usable on the host, where its unit test checks it.
//
// For 0 <= n < 2^31 and 1 <= d < 2^31, with s = ceil(log2 d) and m = ceil(2^(31+s) / d):
// n * m = n * 2^(31+s) / d + n * e with 0 <= e < 1, and n * e < 2^31 <= 2^(31+s) / d, so
// floor(n * m / 2^(31+s)) = floor(n / d) (the fraction part of n / d is at most 1 - 1/d).
// m < 2^32 because d > 2^(s-1).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define KITE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KITE_HOST_DEVICE inline
#endif

namespace kite::cuda {

struct FastDivmod {
  int32_t divisor = 1;
  uint32_t multiplier = 1u << 31;
  uint32_t shift = 31;  // 31 + s

  FastDivmod() = default;
  // divisor in [1, 2^31); the caller checks (a zero divisor has no meaning here).
  explicit FastDivmod(int32_t d) : divisor(d) {
    uint32_t s = 0;
    while ((uint64_t{1} << s) < static_cast<uint64_t>(d)) ++s;
    shift = 31 + s;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << shift) + static_cast<uint64_t>(d) - 1) /
                                       static_cast<uint64_t>(d));
  }

  // n in [0, 2^31).
  KITE_HOST_DEVICE int32_t div(int32_t n) const {
    return static_cast<int32_t>((static_cast<uint64_t>(static_cast<uint32_t>(n)) * multiplier) >>
                                shift);
  }
  KITE_HOST_DEVICE void divmod(int32_t n, int32_t& q, int32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

}  // namespace kite::cuda
