#include "kernels/cpu/attention_fp8.h"

#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_common.h"

namespace kite::ops::cpu {
namespace {

constexpr const char* kOp = "paged_attention";

// Blocks [ids] of an FP8 cache [num_blocks, block_size, heads, row] decoded to fp32 [ids,
// block_size, heads, row - tail]: fp8 * scale, then `tail` BF16 values (two bytes each) per row
// (ops::write_cache).
Tensor gather_blocks(const Tensor& cache, const std::vector<int32_t>& ids, float scale,
                     int64_t tail) {
  const int64_t row = cache.size(3), dim = row - tail, coded = dim - tail;
  const int64_t rows_per_block = cache.size(1) * cache.size(2);
  Tensor out =
      Tensor::empty({static_cast<int64_t>(ids.size()), cache.size(1), cache.size(2), dim});
  const uint8_t* src = cache.data<uint8_t>();
  float* dst = out.data<float>();
  float lut[256];
  for (int c = 0; c < 256; ++c) lut[c] = fp8e4m3_to_f32(static_cast<uint8_t>(c)) * scale;
  for (size_t b = 0; b < ids.size(); ++b)
    for (int64_t r = 0; r < rows_per_block; ++r) {
      const uint8_t* in = src + (static_cast<int64_t>(ids[b]) * rows_per_block + r) * row;
      float* o = dst + (static_cast<int64_t>(b) * rows_per_block + r) * dim;
      for (int64_t i = 0; i < coded; ++i) o[i] = lut[in[i]];
      for (int64_t i = 0; i < tail; ++i)
        o[coded + i] = bf16_to_f32(static_cast<uint16_t>(in[coded + 2 * i] |
                                                         (in[coded + 2 * i + 1] << 8)));
    }
  return out;
}

}  // namespace

void paged_attention_fp8(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         const PagedAttentionParams& params, Tensor& out) {
  KITE_OP_CHECK(k_cache.dtype() == DType::kF8E4M3 && v_cache.dtype() == DType::kF8E4M3, kOp,
                "k_cache and v_cache must both be F8_E4M3 or both F32");
  KITE_OP_CHECK(k_cache.dim() == 4 && v_cache.dim() == 4 && k_cache.size(1) == params.block_size,
                kOp, "fp8 caches must be [num_blocks, block_size, heads, dim] of block_size rows");
  KITE_OP_CHECK(
      params.block_tables != nullptr && params.seq_lens.size() == params.block_tables->size(), kOp,
      "block_tables must list one table per sequence");
  KITE_OP_CHECK(params.k_scale > 0.0f && params.v_scale > 0.0f, kOp, "fp8 scales must be positive");
  // Compact ids for every block a sequence reads (its first ceil(seq_len / block_size) entries).
  std::unordered_map<int32_t, int32_t> compact;
  std::vector<int32_t> ids;
  std::vector<std::vector<int32_t>> tables(params.seq_lens.size());
  const int64_t num_blocks = k_cache.size(0);
  for (size_t s = 0; s < tables.size(); ++s) {
    const auto& table = (*params.block_tables)[s];
    const int64_t used = (params.seq_lens[s] + params.block_size - 1) / params.block_size;
    KITE_OP_CHECK(used <= static_cast<int64_t>(table.size()), kOp,
                  "sequence " + std::to_string(s) + "'s block table is too short");
    for (int64_t b = 0; b < used; ++b) {
      const int32_t id = table[b];
      KITE_OP_CHECK(id >= 0 && id < num_blocks, kOp,
                    "block " + std::to_string(id) + " is outside the cache");
      auto [it, fresh] = compact.emplace(id, static_cast<int32_t>(ids.size()));
      if (fresh) ids.push_back(id);
      tables[s].push_back(it->second);
    }
  }
  if (ids.empty()) ids.push_back(0);  // keep the gathered caches non-empty
  const bool shared = k_cache.raw() == v_cache.raw() && params.k_scale == params.v_scale;
  // A k row wider than q's holds a BF16 tail (MLA's rope key, ops::write_cache): only in the
  // shared latent cache, whose values are its leading, FP8 columns.
  const int64_t tail = k_cache.size(3) - q.size(-1);
  KITE_OP_CHECK(tail == 0 || (shared && tail > 0 && 2 * tail <= k_cache.size(3)), kOp,
                "an FP8 k cache row wider than q's (a BF16 tail) must be the shared latent cache");
  const Tensor k = gather_blocks(k_cache, ids, params.k_scale, tail);
  const Tensor v = shared ? k : gather_blocks(v_cache, ids, params.v_scale, 0);
  PagedAttentionParams p = params;
  p.block_tables = &tables;
  paged_attention(q, k, v, p, out);
}

}  // namespace kite::ops::cpu
