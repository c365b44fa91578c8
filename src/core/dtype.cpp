#include "core/dtype.h"

#include <cmath>
#include <vector>

namespace kite {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
      return 2;
    case DType::kF8E4M3:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kF64:
      return "F64";
    case DType::kI64:
      return "I64";
    case DType::kI32:
      return "I32";
    case DType::kI16:
      return "I16";
    case DType::kI8:
      return "I8";
    case DType::kU8:
      return "U8";
    case DType::kBool:
      return "BOOL";
  }
  return "?";
}

std::optional<DType> dtype_from_safetensors(std::string_view n) {
  if (n == "F32") return DType::kF32;
  if (n == "F16") return DType::kF16;
  if (n == "BF16") return DType::kBF16;
  if (n == "F8_E4M3") return DType::kF8E4M3;
  if (n == "F64") return DType::kF64;
  if (n == "I64") return DType::kI64;
  if (n == "I32") return DType::kI32;
  if (n == "I16") return DType::kI16;
  if (n == "I8") return DType::kI8;
  if (n == "U8") return DType::kU8;
  if (n == "BOOL") return DType::kBool;
  return std::nullopt;
}

uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  // Via the hardware-independent route: scale into half range and round to nearest even.
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u;
  if (a < 6.103515625e-05f) {  // subnormal half: multiples of 2^-24
    uint16_t m = static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
    return sign | m;
  }
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  uint32_t mant = static_cast<uint32_t>(std::nearbyint((m * 2.0f - 1.0f) * 1024.0f));
  int exp = e - 1 + 15;
  if (mant == 1024) {
    mant = 0;
    ++exp;
  }
  if (exp >= 31) return sign | 0x7c00u;
  return sign | static_cast<uint16_t>(exp << 10) | static_cast<uint16_t>(mant);
}

float fp8e4m3_to_f32(uint8_t v) {
  // E4M3 "fn": bias 7, no infinities, 0x7f/0xff are NaN, max finite 448.
  uint32_t sign = v >> 7;
  uint32_t exp = (v >> 3) & 0xf;
  uint32_t mant = v & 0x7;
  float out;
  if (exp == 0xf && mant == 0x7) {
    out = NAN;
  } else if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), -9);  // mant/8 * 2^-6
  } else {
    out = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, static_cast<int>(exp) - 7);
  }
  return sign ? -out : out;
}

const float* fp8e4m3_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int c = 0; c < 256; ++c) t[c] = fp8e4m3_to_f32(static_cast<uint8_t>(c));
    return t;
  }();
  return table.data();
}

uint8_t f32_to_fp8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fmin(std::fabs(f), 448.0f);
  // Search the 127 non-negative codes for the nearest (ties to even code): exact and simple;
  // only used on load / in references, never on a hot path.
  uint8_t best = 0;
  float best_err = INFINITY;
  for (uint8_t c = 0; c < 0x7f; ++c) {
    float err = std::fabs(fp8e4m3_to_f32(c) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best_err = err;
      best = c;
    }
  }
  return sign | best;
}

}  // namespace kite
