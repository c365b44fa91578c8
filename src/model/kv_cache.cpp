#include "model/kv_cache.h"

#include <algorithm>

namespace kite {

int64_t KvCacheSpec::bytes_per_token() const {
  int64_t per_layer = num_kv_heads * (k_row() + (shares_kv ? 0 : v_head_dim));
  return num_layers * per_layer * static_cast<int64_t>(dtype_size(dtype));
}

int64_t KvCacheSpec::k_row() const {
  return k_head_dim + (dtype == DType::kF8E4M3 ? fp8_bf16_tail : 0);
}

KvCache::KvCache(const KvCacheSpec& spec, int64_t num_blocks, int64_t block_size)
    : spec_(spec),
      num_blocks_(num_blocks),
      block_size_(block_size),
      k_scale_(spec.num_layers, 1.0f),
      v_scale_(spec.num_layers, 1.0f) {
  if (static_cast<int64_t>(spec.k_scales.size()) == spec.num_layers) k_scale_ = spec.k_scales;
  if (static_cast<int64_t>(spec.v_scales.size()) == spec.num_layers) v_scale_ = spec.v_scales;
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    // Zeroed so a slot read before it is written (a bug) gives zeros, never garbage/NaN.
    k_.push_back(
        Tensor::zeros({num_blocks, block_size, spec.num_kv_heads, spec.k_row()}, spec.dtype));
    if (!spec.shares_kv)
      v_.push_back(
          Tensor::zeros({num_blocks, block_size, spec.num_kv_heads, spec.v_head_dim}, spec.dtype));
  }
}

KvCache::KvCache(const KvCacheSpec& spec, int64_t num_blocks, int64_t block_size,
                 Backend& backend)
    : spec_(spec),
      num_blocks_(num_blocks),
      block_size_(block_size),
      k_scale_(spec.num_layers, 1.0f),
      v_scale_(spec.num_layers, 1.0f) {
  if (backend.device() == Device::kCpu) {  // host memory in spec.dtype (F32 or FP8)
    *this = KvCache(spec, num_blocks, block_size);
    return;
  }
  // The compute dtype, or FP8 E4M3 with per-layer scales when the spec asks for it.
  spec_.dtype = spec.dtype == DType::kF8E4M3 ? DType::kF8E4M3 : backend.compute_dtype();
  if (static_cast<int64_t>(spec.k_scales.size()) == spec.num_layers) k_scale_ = spec.k_scales;
  if (static_cast<int64_t>(spec.v_scales.size()) == spec.num_layers) v_scale_ = spec.v_scales;
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    k_.push_back(backend.persistent_zeros(
        {num_blocks, block_size, spec.num_kv_heads, spec_.k_row()}, spec_.dtype));
    if (!spec.shares_kv)
      v_.push_back(backend.persistent_zeros(
          {num_blocks, block_size, spec.num_kv_heads, spec.v_head_dim}, spec_.dtype));
  }
}

int64_t KvCache::blocks_for_budget(const KvCacheSpec& spec, int64_t block_size,
                                   int64_t budget_bytes) {
  int64_t per_block = std::max<int64_t>(1, spec.bytes_per_token() * block_size);
  return std::max<int64_t>(1, budget_bytes / per_block);
}

}  // namespace kite
