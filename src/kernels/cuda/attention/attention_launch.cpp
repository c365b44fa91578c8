#include "kernels/cuda/attention/attention_launch.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/env_switch.h"

namespace kite::cuda::attention {
namespace {

std::string shape(const Tensor& t) { return shape_to_string(t.shape()); }

bool supported(int64_t dqk, int64_t dv) {
  for (const auto& pair : kSupportedHeadDims)
    if (pair[0] == dqk && pair[1] == dv) return true;
  return false;
}

void check_fits_int(const char* op, int64_t value, const char* what) {
  KITE_CUDA_OP_CHECK(value >= 0 && value <= INT_MAX, op,
                     std::string(what) + " " + std::to_string(value) + " does not fit a launch");
}

}  // namespace

KernelParams check_and_describe(const char* op, const Tensor& q, const Tensor& k_cache,
                                const Tensor& v_cache, const PagedAttentionArgs& args,
                                const Tensor& out, bool decode) {
  check_device_float(q, op, "q");
  // FP8 caches go with BF16 queries (the tensor-core kernels convert them to BF16 tiles).
  const bool kv_fp8 = k_cache.dtype() == DType::kF8E4M3 && q.dtype() == DType::kBF16;
  const DType cache_dtype = kv_fp8 ? DType::kF8E4M3 : q.dtype();
  check_device(k_cache, cache_dtype, op, "k_cache");
  check_device(v_cache, cache_dtype, op, "v_cache");
  if (kv_fp8)
    KITE_CUDA_OP_CHECK(args.k_scale > 0 && args.v_scale > 0 && std::isfinite(args.k_scale) &&
                           std::isfinite(args.v_scale),
                       op, "FP8 caches need positive finite k_scale / v_scale");
  check_device(out, q.dtype(), op, "out");
  KITE_CUDA_OP_CHECK(q.dim() == 3 && out.dim() == 3 && k_cache.dim() == 4 && v_cache.dim() == 4, op,
                     "need q [T, H, Dqk], caches [blocks, block_size, Hkv, D], out [T, H, Dv]; got "
                     "q " +
                         shape(q) + ", k " + shape(k_cache) + ", v " + shape(v_cache) + ", out " +
                         shape(out));
  const int64_t tokens = q.size(0), heads = q.size(1), dqk = q.size(2), dv = out.size(2);
  const int64_t num_blocks = k_cache.size(0), block_size = k_cache.size(1);
  const int64_t kv_heads = k_cache.size(2);
  const bool shared_cache = v_cache.raw() == k_cache.raw() && v_cache.shape() == k_cache.shape();
  // An FP8 latent cache's rows are wider than q's: their last `tail` values (the rope key) are
  // BF16, two bytes each (ops::write_cache's bf16_tail).
  const int64_t tail = kv_fp8 && shared_cache ? k_cache.size(3) - dqk : 0;
  KITE_CUDA_OP_CHECK(k_cache.size(3) == dqk + tail && tail >= 0, op,
                     "k_cache " + shape(k_cache) + " must have head_dim " + std::to_string(dqk) +
                         (kv_fp8 && shared_cache ? " (plus a BF16 tail)" : ""));
  if (tail > 0)
    KITE_CUDA_OP_CHECK(
        tail % 8 == 0 && (dqk - tail) % 8 == 0 && dv <= dqk - tail && (dqk + tail) % 16 == 0, op,
        "a BF16 tail of " + std::to_string(tail) + " values in " + shape(k_cache) +
            " rows: tail and coded width must be multiples of 8, the value (" + std::to_string(dv) +
            " dims) within the coded part, rows 16-byte multiples");
  KITE_CUDA_OP_CHECK(out.size(0) == tokens && out.size(1) == heads, op,
                     "out " + shape(out) + " must be [" + std::to_string(tokens) + ", " +
                         std::to_string(heads) + ", head_dim_v]");
  if (shared_cache) {
    KITE_CUDA_OP_CHECK(dv <= dqk, op, "with one cache for K and V, head_dim_v must be <= qk");
  } else {
    KITE_CUDA_OP_CHECK(v_cache.size(0) == num_blocks && v_cache.size(1) == block_size &&
                           v_cache.size(2) == kv_heads && v_cache.size(3) == dv,
                       op,
                       "v_cache " + shape(v_cache) + " must be [" + std::to_string(num_blocks) +
                           ", " + std::to_string(block_size) + ", " + std::to_string(kv_heads) +
                           ", " + std::to_string(dv) + "]");
  }
  KITE_CUDA_OP_CHECK(supported(dqk, dv), op,
                     "no kernel for head dims (" + std::to_string(dqk) + ", " + std::to_string(dv) +
                         "); see kSupportedHeadDims");
  KITE_CUDA_OP_CHECK(kv_heads > 0 && heads % kv_heads == 0, op,
                     std::to_string(heads) + " query heads are not a multiple of " +
                         std::to_string(kv_heads) + " kv heads");
  KITE_CUDA_OP_CHECK(args.block_size == block_size && block_size > 0, op,
                     "args.block_size " + std::to_string(args.block_size) +
                         " != cache block size " + std::to_string(block_size));
  check_device(args.seq_lens, DType::kI32, op, "seq_lens");
  check_device(args.block_tables, DType::kI32, op, "block_tables");
  const int64_t seqs = args.seq_lens.numel();
  KITE_CUDA_OP_CHECK(args.block_tables.dim() == 2 && args.block_tables.size(0) == seqs, op,
                     "block_tables " + shape(args.block_tables) + " must be [" +
                         std::to_string(seqs) + ", max_blocks_per_seq]");
  if (decode) {
    KITE_CUDA_OP_CHECK(tokens == seqs, op,
                       "decode takes one query per sequence: " + std::to_string(tokens) +
                           " queries for " + std::to_string(seqs) + " sequences");
  } else {
    check_device(args.query_start, DType::kI32, op, "query_start");
    KITE_CUDA_OP_CHECK(args.query_start.numel() == seqs + 1, op,
                       "query_start needs num_seqs + 1 = " + std::to_string(seqs + 1) + " entries");
    KITE_CUDA_OP_CHECK(seqs <= 65535, op, "at most 65535 sequences per launch");
  }
  // Rows are read in vectors of up to 16 bytes (attention_common.cuh).
  for (const Tensor* t : {&q, &k_cache, &v_cache, &out}) {
    KITE_CUDA_OP_CHECK(reinterpret_cast<uintptr_t>(t->raw()) % 16 == 0, op,
                       "q, caches and out must start 16-byte aligned");
  }
  KITE_CUDA_OP_CHECK(
      !bytes_overlap(out, q) && !bytes_overlap(out, k_cache) && !bytes_overlap(out, v_cache), op,
      "out must not overlap q or the caches");
  check_fits_int(op, tokens, "tokens");
  check_fits_int(op, num_blocks, "num_blocks");
  check_fits_int(op, block_size, "block_size");
  check_fits_int(op, args.block_tables.size(1), "max_blocks_per_seq");
  check_fits_int(op, tokens * heads, "tokens * heads");

  KernelParams p;
  p.q = q.raw();
  p.k_cache = k_cache.raw();
  p.v_cache = v_cache.raw();
  p.out = const_cast<void*>(out.raw());
  p.query_start = decode ? nullptr : static_cast<const int32_t*>(args.query_start.raw());
  // KITE_CUDA_DECODE_EARLY_TILE=0: decode waits for the kernel before first (A/B runs).
  static const bool early_tile = !env_switched_off("KITE_CUDA_DECODE_EARLY_TILE");
  p.decode_step = decode && early_tile;
  p.seq_lens = static_cast<const int32_t*>(args.seq_lens.raw());
  p.block_tables = static_cast<const int32_t*>(args.block_tables.raw());
  p.num_tokens = static_cast<int>(tokens);
  p.num_seqs = static_cast<int>(seqs);
  p.num_heads = static_cast<int>(heads);
  p.num_kv_heads = static_cast<int>(kv_heads);
  p.block_size = static_cast<int>(block_size);
  p.num_blocks = static_cast<int>(num_blocks);
  p.max_blocks_per_seq = static_cast<int>(args.block_tables.size(1));
  p.k_slot_stride = kv_heads * (dqk + tail);
  p.k_head_stride = dqk + tail;
  p.v_slot_stride = shared_cache ? kv_heads * (dqk + tail) : kv_heads * dv;
  p.v_head_stride = shared_cache ? dqk + tail : dv;
  p.scale_log2 = args.scale * 1.4426950408889634f;
  p.head_dim_qk = static_cast<int>(dqk);
  p.head_dim_v = static_cast<int>(dv);
  p.bf16 = q.dtype() == DType::kBF16;
  p.kv_fp8 = kv_fp8;
  p.k_scale = args.k_scale;
  p.v_scale = args.v_scale;
  p.kv_bf16_tail = static_cast<int>(tail);
  return p;
}

}  // namespace kite::cuda::attention

namespace kite::cuda {

bool fp8_cache_covered(int64_t k_dims, int64_t v_dims, bool shared) {
  // The latent cache: decode_mla.cu (MLA prefill runs on it too).
  if (shared) return k_dims == attention::kMlaDqk;
  return attention::mma_covers_head_dims(k_dims, v_dims);
}

}  // namespace kite::cuda

namespace kite::cuda::attention {

void reserve_split_partials(KernelParams& p, int64_t rows, AttentionWorkspace& workspace) {
  if (p.num_splits <= 1) return;
  const size_t acc_floats = static_cast<size_t>(rows) * p.num_splits * p.head_dim_v;
  const size_t ml_floats = static_cast<size_t>(rows) * p.num_splits * 2;
  auto* base = static_cast<float*>(workspace.reserve((acc_floats + ml_floats) * sizeof(float)));
  p.part_acc = base;
  p.part_ml = base + acc_floats;
}

int64_t min_keys_per_split_from_env(const char* env, int64_t tile) {
  const long long n = env_number(env, 0);
  return n >= tile ? static_cast<int64_t>(n) : tile;
}

}  // namespace kite::cuda::attention
