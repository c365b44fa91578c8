// KV-cache store: copies each new token's row into its slot of the paged cache.
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"
#include "quant/fp8_codec.h"

namespace kite::ops {

void write_cache(const Tensor& src, std::span<const int64_t> slot_mapping, Tensor& cache,
                 float scale, int64_t bf16_tail) {
  constexpr const char* kOp = "write_cache";
  cpu::check_f32(src, kOp, "src");
  const bool fp8 = cache.dtype() == DType::kF8E4M3;
  if (!fp8) cpu::check_f32(cache, kOp, "cache");
  KITE_OP_CHECK(!fp8 || (scale > 0.0f && std::isfinite(scale)), kOp,
                "an FP8 cache needs a positive finite scale");
  KITE_OP_CHECK(cache.dim() >= 3, kOp,
                "cache must be [num_blocks, block_size, ...], got " + cpu::shape_of(cache));
  const int64_t num_slots = cache.size(0) * cache.size(1);
  const int64_t row = num_slots == 0 ? 0 : cache.numel() / num_slots;  // cache row elements
  const auto num_tokens = static_cast<int64_t>(slot_mapping.size());
  KITE_OP_CHECK(bf16_tail == 0 || (fp8 && bf16_tail > 0 && 2 * bf16_tail <= row), kOp,
                "a BF16 tail of " + std::to_string(bf16_tail) +
                    " values needs an F8_E4M3 cache row of at least twice that");
  const int64_t tail = bf16_tail;
  const int64_t width = row - tail;  // src's row: each tail value takes two bytes of the row
  KITE_OP_CHECK(
      src.dim() >= 1 && src.size(0) == num_tokens && src.numel() == num_tokens * width, kOp,
      "src " + cpu::shape_of(src) + " must be " + std::to_string(num_tokens) + " rows of " +
          std::to_string(width) + " values to fit cache " + cpu::shape_of(cache) +
          (tail ? " with a BF16 tail of " + std::to_string(tail) : std::string()));
  // All slots are checked first, so a bad mapping leaves the cache untouched.
  for (int64_t t = 0; t < num_tokens; ++t) {
    KITE_OP_CHECK(slot_mapping[t] >= 0 && slot_mapping[t] < num_slots, kOp,
                  "slot " + std::to_string(slot_mapping[t]) + " of token " + std::to_string(t) +
                      " is outside the cache's " + std::to_string(num_slots) + " slots");
  }
  const float* in = src.data<float>();
  if (fp8) {
    const float inv = 1.0f / scale;
    uint8_t* out = cache.data<uint8_t>();
    const int64_t coded = width - tail;
    for (int64_t t = 0; t < num_tokens; ++t) {
      uint8_t* o = out + slot_mapping[t] * row;
      const float* x = in + t * width;
      for (int64_t i = 0; i < coded; ++i) o[i] = fp8e4m3_encode(x[i] * inv);
      for (int64_t i = 0; i < tail; ++i) {
        const uint16_t b = f32_to_bf16(x[coded + i]);
        o[coded + 2 * i] = static_cast<uint8_t>(b & 0xff);
        o[coded + 2 * i + 1] = static_cast<uint8_t>(b >> 8);
      }
    }
    return;
  }
  float* out = cache.data<float>();
  for (int64_t t = 0; t < num_tokens; ++t)
    std::memcpy(out + slot_mapping[t] * width, in + t * width, width * sizeof(float));
}

}  // namespace kite::ops
