// KvCache: the paged K/V memory of every layer, preallocated once.
//
// Layout per layer: k [num_blocks, block_size, num_kv_heads, k_head_dim] and
// v [num_blocks, block_size, num_kv_heads, v_head_dim]. MLA layers cache only the compressed
// latent (kv_lora_rank + qk_rope_head_dim per token, one "head") in k; their v is the same
// tensor (attention reads the latent as values too), so `shares_kv` is set and no v is
// allocated. The cache knows nothing of which sequence owns a block: block tables do.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/backend.h"

namespace kite {

struct KvCacheSpec {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t k_head_dim = 0;
  int64_t v_head_dim = 0;
  bool shares_kv = false;  // MLA: values are read from the k (latent) cache
  // F32, or F8_E4M3 (--kv-cache-dtype fp8): stored as fp8(x / scale) with per-layer scales.
  DType dtype = DType::kF32;
  // Per-layer FP8 scales (KvCache's initial k_scale / v_scale); empty: 1.0 for every layer.
  std::vector<float> k_scales, v_scales;
  // FP8 only: the last `fp8_bf16_tail` values of each k row are stored as BF16 (two bytes each,
  // so an FP8 k row is k_head_dim + fp8_bf16_tail bytes; ops::write_cache). MLA sets it to the
  // rope key's width: rounding those 16-64 values to E4M3 was all of kite-tiny's FP8-cache
  // perplexity loss (+0.62 % of +0.61 %; the latent alone +0.08 %; BENCHMARKS.md).
  int64_t fp8_bf16_tail = 0;

  // Bytes one token occupies across all layers.
  int64_t bytes_per_token() const;
  // Elements of one k row in the cache tensor: k_head_dim, plus the BF16 tail's extra bytes.
  int64_t k_row() const;
};

class KvCache {
 public:
  KvCache() = default;
  // Host fp32 cache.
  KvCache(const KvCacheSpec& spec, int64_t num_blocks, int64_t block_size);
  // Cache on the model's backend: the host constructor on the CPU (spec.dtype, F32 or FP8);
  // on CUDA the backend's memory in its compute dtype (BF16), scales 1.
  KvCache(const KvCacheSpec& spec, int64_t num_blocks, int64_t block_size, Backend& backend);
  // As many blocks as fit in `budget_bytes` (at least one).
  static int64_t blocks_for_budget(const KvCacheSpec& spec, int64_t block_size,
                                   int64_t budget_bytes);

  const KvCacheSpec& spec() const { return spec_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  Tensor& k(int64_t layer) { return k_[layer]; }
  Tensor& v(int64_t layer) { return spec_.shares_kv ? k_[layer] : v_[layer]; }
  // Per-layer dequantization scales of an FP8 cache (1.0 unless set; an F32 cache ignores them).
  float k_scale(int64_t layer) const { return k_scale_[layer]; }
  float v_scale(int64_t layer) const { return v_scale_[layer]; }
  void set_scales(int64_t layer, float k_scale, float v_scale) {
    k_scale_[layer] = k_scale;
    v_scale_[layer] = v_scale;
  }

 private:
  KvCacheSpec spec_;
  int64_t num_blocks_ = 0;
  int64_t block_size_ = 0;
  std::vector<Tensor> k_;
  std::vector<Tensor> v_;
  std::vector<float> k_scale_, v_scale_;
};

}  // namespace kite
