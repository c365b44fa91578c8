// Fast FP8 E4M3 encoding for hot paths (activation quantization, FP8 KV cache writes).
//
// core/dtype's f32_to_fp8e4m3 searches the codes (exact, meant for loaders); this computes the
// same code with bit arithmetic: saturate to 448, round to nearest even on the 3 mantissa bits
// (the carry may bump the exponent), subnormals (|x| < 2^-6) on the 2^-9 grid. NaN -> 0x7F.
// Tested equal to f32_to_fp8e4m3 (tests/unit/quant/quant_linear_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kite {

inline uint8_t fp8e4m3_encode(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fmin(std::fabs(f), 448.0f);
  if (a < 0.015625f)  // subnormal: multiples of 2^-9, ties to even (default rounding mode)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  const uint32_t rounded = (bits + 0x7FFFFu + ((bits >> 20) & 1u)) >> 20;  // exp(8) | mant(3)
  return sign | static_cast<uint8_t>(rounded - ((127u - 7u) << 3));
}

}  // namespace kite
