// KV-cache store: copies each new token's row into its slot of the paged cache.
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"
#include "quant/fp8_codec.h"

namespace kite::ops {

void write_cache(const Tensor& src, std::span<const int64_t> slot_mapping, Tensor& cache,
                 float scale) {
  constexpr const char* kOp = "write_cache";
  cpu::check_f32(src, kOp, "src");
  const bool fp8 = cache.dtype() == DType::kF8E4M3;
  if (!fp8) cpu::check_f32(cache, kOp, "cache");
  KITE_OP_CHECK(!fp8 || (scale > 0.0f && std::isfinite(scale)), kOp,
                "an FP8 cache needs a positive finite scale");
  KITE_OP_CHECK(cache.dim() >= 3, kOp,
                "cache must be [num_blocks, block_size, ...], got " + cpu::shape_of(cache));
  const int64_t num_slots = cache.size(0) * cache.size(1);
  const int64_t width = num_slots == 0 ? 0 : cache.numel() / num_slots;
  const auto num_tokens = static_cast<int64_t>(slot_mapping.size());
  KITE_OP_CHECK(
      src.dim() >= 1 && src.size(0) == num_tokens && src.numel() == num_tokens * width, kOp,
      "src " + cpu::shape_of(src) + " must be " + std::to_string(num_tokens) + " rows of " +
          std::to_string(width) + " values to fit cache " + cpu::shape_of(cache));
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
    for (int64_t t = 0; t < num_tokens; ++t)
      for (int64_t i = 0; i < width; ++i)
        out[slot_mapping[t] * width + i] = fp8e4m3_encode(in[t * width + i] * inv);
    return;
  }
  float* out = cache.data<float>();
  for (int64_t t = 0; t < num_tokens; ++t)
    std::memcpy(out + slot_mapping[t] * width, in + t * width, width * sizeof(float));
}

}  // namespace kite::ops
