// Element types kite stores. Compute on the CPU is fp32; narrower types exist for weights
// as loaded from checkpoints and (later) for device tensors and KV caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kite {

enum class DType : uint8_t { kF32, kF16, kBF16, kF8E4M3, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string ("F32", "BF16", "F8_E4M3", ...).
std::optional<DType> dtype_from_safetensors(std::string_view name);

// Scalar conversions used by loaders and reference kernels.
inline float bf16_to_f32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t f32_to_bf16(float f);  // round to nearest even, NaN preserved
float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float f);
float fp8e4m3_to_f32(uint8_t v);
// The 256 decoded E4M3 codes, built once: decoding a code is a table read.
const float* fp8e4m3_table();
uint8_t f32_to_fp8e4m3(float f);  // saturating, round to nearest even

}  // namespace kite
