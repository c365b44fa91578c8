// Rotary embedding, KV-cache store, and the fused rope + cache write, as one kernel.
//
// A launch processes up to three targets (q, k, v) of a token batch. Block (t, y) takes one
// token and one chunk of heads of one target: it stages the chunk's rotary dims in shared
// memory (the interleaved style reads pairs (2i, 2i+1) and writes (i, i+h), so every input
// must be read before any output is written), rotates them in place (or, for q, into q_out),
// and, for a target with a cache, writes the whole head rows (rotated and pass-through dims)
// into the slot of the token. A target may first RMS-normalise the leading columns of its head
// rows in place (MLA's latent [c_kv | k_rope]: the kv_a norm, one launch instead of two).
// Slots outside [0, num_slots) are skipped, so padding tokens (slot -1) write nothing.
#include <cuda_fp8.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm/gemv_out.cuh"
#include "kernels/cuda/gemm/head_gemv.cuh"
#include "kernels/cuda/gemm/head_linear.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/rope_pair.cuh"

namespace kite::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kStageFloats = 4096;  // 16 KB of shared memory per block
constexpr int kMaxTargets = 3;

// One tensor of the launch: x [T, heads, dim], rotated over [rot_offset, +rot_dim) unless
// rot_offset < 0, and copied to cache [num_slots, heads, dim] when cache is set.
// An FP8 cache (cache8 instead of cache) stores fp8(x / scale), saturated to +-448 (the CPU's
// ops::write_cache: the same division, the same round-to-nearest-even).
template <typename T>
struct RopeTarget {
  T* x = nullptr;
  // When set, the rotated dims go to out [T, heads, out_dim] at out_rot_offset instead of back
  // into x (x is then only read): MLA's q rope dims land in the absorbed query directly.
  T* out = nullptr;
  int out_dim = 0, out_rot_offset = 0;
  T* cache = nullptr;
  uint8_t* cache8 = nullptr;
  float scale = 1.0f;
  // cache8 only: the last `tail` dims of a head row go as BF16 bits (two bytes each) after the
  // FP8 codes of the first dim - tail, so a cache row is dim + tail bytes.
  int tail = 0;
  int heads = 0, dim = 0, rot_offset = -1;
  int heads_per_block = 1, num_chunks = 0;
  // When set: each head row's first norm_width values become rms_norm(values) * norm_weight
  // (rms_norm_kernel's arithmetic, norm.cu), in x, before anything else reads them.
  const T* norm_weight = nullptr;
  int norm_width = 0;
  float norm_eps = 0.0f;
};

template <typename T>
struct RopeLaunch {
  RopeTarget<T> targets[kMaxTargets];
  int num_targets = 0;
  const float* cos = nullptr;  // [T, rot_dim/2]
  const float* sin = nullptr;
  const int64_t* slots = nullptr;  // [T] or null when no target has a cache
  int64_t num_slots = 0;
  int rot_dim = 0;
  bool interleaved = false;
  // The per-head GEMV run beside the rope (RopeCacheParams::head_w), BF16 only: its blocks come
  // after the targets' chunks in grid.y, numbered across grid.x.
  HeadGemvArgs head;
  int head_blocks = 0, head_blocks_per_head = 0, rope_chunks = 0;
};

// HEAD_M: the rows of the head GEMV run beside the rope (args.head), 0 for none.
template <typename T, int HEAD_M>
__global__ void rope_cache_kernel(const RopeLaunch<T> args) {
  __shared__ float stage[kStageFloats];
  // Launched early (PDL): q / k / v come from before; then the next may launch.
  const auto wait_and_trigger = [] {
    pdl_wait();
    pdl_trigger();
  };
  if constexpr (HEAD_M > 0) {
    if (static_cast<int>(blockIdx.y) >= args.rope_chunks) {  // the head GEMV's blocks
      const int b = (blockIdx.y - args.rope_chunks) * gridDim.x + blockIdx.x;
      if (b < args.head_blocks)
        head_gemv_block<HEAD_M>(args.head, b % args.head_blocks_per_head,
                                b / args.head_blocks_per_head, wait_and_trigger);
      return;
    }
  }
  wait_and_trigger();
  const int64_t token = blockIdx.x;
  int chunk = blockIdx.y, which = 0;
  while (which + 1 < args.num_targets && chunk >= args.targets[which].num_chunks) {
    chunk -= args.targets[which].num_chunks;
    ++which;
  }
  const RopeTarget<T>& tg = args.targets[which];
  const int head0 = chunk * tg.heads_per_block;
  const int heads = min(tg.heads_per_block, tg.heads - head0);
  T* x = tg.x + (token * tg.heads + head0) * tg.dim;
  const bool rotate = tg.rot_offset >= 0;
  const int rot = args.rot_dim, half = rot / 2;

  if (tg.norm_weight) {  // the same for every thread of the block
    __shared__ float scratch[32];
    for (int h = 0; h < heads; ++h) {
      T* row = x + h * tg.dim;
      float sum_sq = 0.0f;
      for (int i = threadIdx.x; i < tg.norm_width; i += blockDim.x) {
        const float f = to_float(row[i]);
        sum_sq += f * f;
      }
      // rms_norm_kernel's arithmetic (norm.cu); block_sum's barriers also order these reads
      // before the writes below.
      const float inv_rms =
          rsqrtf(block_sum(sum_sq, scratch) / static_cast<float>(tg.norm_width) + tg.norm_eps);
      for (int i = threadIdx.x; i < tg.norm_width; i += blockDim.x) {
        const float normed = to_float(from_float<T>(to_float(row[i]) * inv_rms));
        row[i] = from_float<T>(normed * to_float(tg.norm_weight[i]));
      }
    }
    __syncthreads();  // the cache copy below reads values other threads wrote
  }

  // 16-byte accesses where every row start and width allows (a Llama head: 128 values from
  // dim 0), else one value at a time.
  constexpr int kVec = 16 / sizeof(T);
  const bool vec_rows = tg.dim % kVec == 0 && (reinterpret_cast<uintptr_t>(tg.x) & 15) == 0;
  if (rotate) {
    if (vec_rows && rot % kVec == 0 && tg.rot_offset % kVec == 0) {
      for (int e = threadIdx.x * kVec; e < heads * rot; e += blockDim.x * kVec) {
        const Vec<T, kVec> v = load_vec<T, kVec>(x + (e / rot) * tg.dim + tg.rot_offset + e % rot);
#pragma unroll
        for (int j = 0; j < kVec; ++j) stage[e + j] = to_float(v.v[j]);
      }
    } else {
      for (int e = threadIdx.x; e < heads * rot; e += blockDim.x)
        stage[e] = to_float(x[(e / rot) * tg.dim + tg.rot_offset + e % rot]);
    }
    __syncthreads();
    const float* cos = args.cos + token * half;
    const float* sin = args.sin + token * half;
    for (int e = threadIdx.x; e < heads * half; e += blockDim.x) {
      const int h = e / half, i = e % half;
      const float* s = stage + h * rot;
      const float a = args.interleaved ? s[2 * i] : s[i];
      const float b = args.interleaved ? s[2 * i + 1] : s[i + half];
      T* dst = tg.out ? tg.out + (token * tg.heads + head0 + h) * tg.out_dim + tg.out_rot_offset
                      : x + h * tg.dim + tg.rot_offset;
      const float2 r = rotate_pair(a, b, cos[i], sin[i]);
      dst[i] = from_float<T>(r.x);
      dst[i + half] = from_float<T>(r.y);
    }
  }
  if (tg.cache == nullptr && tg.cache8 == nullptr) return;
  const int64_t slot = args.slots[token];
  if (slot < 0 || slot >= args.num_slots) return;
  // Each thread re-reads what it needs; the rotated values were written by other threads.
  if (rotate) __syncthreads();
  if (tg.cache8) {
    const int row = tg.dim + tg.tail, coded = tg.dim - tg.tail;
    uint8_t* dst = tg.cache8 + (slot * tg.heads + head0) * row;
    for (int e = threadIdx.x; e < heads * tg.dim; e += blockDim.x) {
      const int h = e / tg.dim, i = e % tg.dim;
      if (i < coded) {
        dst[h * row + i] = __nv_fp8_e4m3(to_float(x[e]) / tg.scale).__x;
      } else {
        const bf16 b = __float2bfloat16_rn(to_float(x[e]));
        *reinterpret_cast<uint16_t*>(dst + h * row + coded + 2 * (i - coded)) =
            __bfloat16_as_ushort(b);
      }
    }
    return;
  }
  const int64_t at = (slot * tg.heads + head0) * tg.dim;
  T* dst = tg.cache + at;
  if (vec_rows && (reinterpret_cast<uintptr_t>(tg.cache) & 15) == 0) {
    for (int e = threadIdx.x * kVec; e < heads * tg.dim; e += blockDim.x * kVec)
      store_vec<T, kVec>(dst + e, load_vec<T, kVec>(x + e));
  } else {
    for (int e = threadIdx.x; e < heads * tg.dim; e += blockDim.x) dst[e] = x[e];
  }
}

void check_rope_dims(const char* op, const Tensor& x, int64_t rot_offset, int64_t rot_dim) {
  KITE_CUDA_OP_CHECK(x.dim() == 3, op,
                     "tensor must be [T, heads, head_dim], got " + shape_to_string(x.shape()));
  KITE_CUDA_OP_CHECK(
      rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= kStageFloats && rot_offset >= 0 &&
          rot_offset + rot_dim <= x.size(2),
      op,
      "rotary dims [" + std::to_string(rot_offset) + ", " + std::to_string(rot_offset + rot_dim) +
          ") must be an even, non-empty range inside head_dim " + std::to_string(x.size(2)));
}

void check_cos_sin(const char* op, const Tensor& cos, const Tensor& sin, int64_t tokens,
                   int64_t rot_dim) {
  for (const Tensor* t : {&cos, &sin}) {
    check_device(*t, DType::kF32, op, "cos/sin");
    KITE_CUDA_OP_CHECK(t->dim() == 2 && t->size(0) == tokens && t->size(1) == rot_dim / 2, op,
                       "cos/sin " + shape_to_string(t->shape()) + " must be [" +
                           std::to_string(tokens) + ", " + std::to_string(rot_dim / 2) + "]");
  }
}

// Below this many tokens every head gets its own block: a decode step of a few sequences would
// otherwise run as one block per tensor, each thread walking 16+ values one after another
// (9.6 us per Llama-3-8B layer at batch 1, 5.5 us with a block per head; KITE_CUDA_OP_TIMES).
constexpr int64_t kFewTokens = 16;

// A target over x viewed as [T, heads, dim]; rot_offset < 0 means copy only.
template <typename T>
RopeTarget<T> make_target(const Tensor& x, int64_t heads, int64_t dim, int64_t rot_offset,
                          int64_t rot_dim, Tensor* cache, int64_t tokens, float scale = 1.0f,
                          int64_t bf16_tail = 0) {
  RopeTarget<T> t;
  t.x = static_cast<T*>(const_cast<void*>(x.raw()));
  if (cache && cache->dtype() == DType::kF8E4M3) {
    t.cache8 = static_cast<uint8_t*>(cache->raw());
    t.scale = scale;
    t.tail = static_cast<int>(bf16_tail);
  } else {
    t.cache = cache ? static_cast<T*>(cache->raw()) : nullptr;
  }
  t.heads = static_cast<int>(heads);
  t.dim = static_cast<int>(dim);
  t.rot_offset = static_cast<int>(rot_offset);
  // A copy-only target (v) stages nothing: at prefill its block takes all of a token's heads
  // (a block of one 128-value head left most of its 256 threads idle).
  t.heads_per_block =
      rot_offset >= 0 ? std::max<int>(1, kStageFloats / static_cast<int>(rot_dim)) : t.heads;
  t.heads_per_block = tokens < kFewTokens ? 1 : std::min(t.heads_per_block, t.heads);
  t.num_chunks = (t.heads + t.heads_per_block - 1) / t.heads_per_block;
  return t;
}

template <typename T>
void launch(RopeLaunch<T>& args, int64_t tokens, cudaStream_t stream) {
  args.rope_chunks = 0;
  for (int i = 0; i < args.num_targets; ++i) args.rope_chunks += args.targets[i].num_chunks;
  if (tokens == 0 || args.rope_chunks == 0) return;
  const int64_t chunks = args.rope_chunks + (args.head_blocks + tokens - 1) / tokens;
  KITE_CUDA_OP_CHECK(tokens <= INT32_MAX && chunks <= 65535, "rope",
                     "batch too large for one launch");
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>(chunks));
  const auto run = [&](auto kernel) {
    launch_pdl_if(pdl_for_small_kernels(), kernel, grid, kThreads, 0, stream, args);
  };
  if constexpr (std::is_same_v<T, bf16>) {
    if (args.head_blocks > 0) {
      with_rows<kHeadGemvMaxRows>(args.head.rows, [&](auto rows) {
        run(rope_cache_kernel<T, decltype(rows)::value>);
      });
      KITE_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  run(rope_cache_kernel<T, 0>);  // no head product (it is BF16 only)
  KITE_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_rope_cache(const RopeCacheParams& p, int64_t tokens, int64_t num_slots,
                       cudaStream_t stream) {
  RopeLaunch<T> args;
  if (p.q && p.q->numel() > 0) {
    RopeTarget<T>& q = args.targets[args.num_targets++];
    q = make_target<T>(*p.q, p.q->size(1), p.q->size(2), p.q_rot_offset, p.rot_dim, nullptr,
                       tokens);
    if (p.q_out) {
      q.out = static_cast<T*>(p.q_out->raw());
      q.out_dim = static_cast<int>(p.q_out->size(2));
      q.out_rot_offset = static_cast<int>(p.q_out_offset);
    }
  }
  RopeTarget<T>& k = args.targets[args.num_targets++];
  k = make_target<T>(*p.k, p.k->size(1), p.k->size(2), p.k_rot_offset, p.rot_dim, p.k_cache, tokens,
                     p.k_scale, p.k_bf16_tail);
  if (p.k_norm_weight) {
    k.norm_weight = static_cast<const T*>(p.k_norm_weight->raw());
    k.norm_width = static_cast<int>(p.k_norm_width);
    k.norm_eps = p.k_norm_eps;
  }
  if (p.v)
    args.targets[args.num_targets++] = make_target<T>(*p.v, p.v->size(1), p.v->size(2), -1,
                                                      p.rot_dim, p.v_cache, tokens, p.v_scale);
  args.cos = static_cast<const float*>(p.cos->raw());
  args.sin = static_cast<const float*>(p.sin->raw());
  args.slots = static_cast<const int64_t*>(p.slot_mapping->raw());
  args.num_slots = num_slots;
  args.rot_dim = static_cast<int>(p.rot_dim);
  args.interleaved = p.style == ops::RopeStyle::kInterleaved;
  if (p.head_w) {
    args.head = head_gemv_args(*p.head_x, p.head_x_off, *p.head_w, *p.head_y, p.head_y_off);
    args.head_blocks_per_head = head_gemv_blocks_per_head(args.head);
    args.head_blocks = args.head_blocks_per_head * args.head.heads;
  }
  launch(args, tokens, stream);
}

// The head product that rope_and_cache runs beside the rope (RopeCacheParams::head_w): the
// kernel's shapes, and no overlap with what the rope step reads or writes (q's rotated columns
// in q_out may share head_y's rows, not its columns).
void check_head_product(const char* op, const RopeCacheParams& p) {
  check_head_linear(*p.head_x, p.head_x_off, *p.head_w, *p.head_y, p.head_y_off);
  KITE_CUDA_OP_CHECK(
      head_gemv_applies(*p.head_x, p.head_x_off, *p.head_w) && p.head_x->size(0) == p.k->size(0),
      op, "the head product needs BF16 rows of the step's tokens, at most 4");
  const bool q_in_place = p.q && !p.q_out;
  KITE_CUDA_OP_CHECK(
      !bytes_overlap(*p.head_x, *p.k) && !(q_in_place && bytes_overlap(*p.head_x, *p.q)), op,
      "the head product must not read what the rope writes");
  const Tensor& y = *p.head_y;
  bool apart = !bytes_overlap(y, *p.k) && !(p.q && bytes_overlap(y, *p.q)) &&
               !(p.v && bytes_overlap(y, *p.v)) && !bytes_overlap(y, *p.head_x);
  if (p.q_out && bytes_overlap(y, *p.q_out)) {
    const int64_t y_end = p.head_y_off + p.head_w->size(1);
    apart = apart && y.raw() == p.q_out->raw() && y.shape() == p.q_out->shape() &&
            (y_end <= p.q_out_offset || p.head_y_off >= p.q_out_offset + p.rot_dim);
  }
  KITE_CUDA_OP_CHECK(apart, op, "the head product's output must not overlap the rope's tensors");
}

// The cache must be [num_blocks, block_size, heads, dim (+ tail)] for a [T, heads, dim] source.
// An FP8 E4M3 cache is allowed for a BF16 source (stored as fp8(x / scale)), and only it may
// keep a BF16 tail.
void check_cache(const char* op, const Tensor& src, const Tensor& cache, const char* name,
                 int64_t bf16_tail = 0) {
  const bool fp8 = cache.dtype() == DType::kF8E4M3 && src.dtype() == DType::kBF16;
  check_device(cache, fp8 ? DType::kF8E4M3 : src.dtype(), op, name);
  KITE_CUDA_OP_CHECK(bf16_tail == 0 || (fp8 && bf16_tail > 0 && bf16_tail <= src.size(2)), op,
                     "a BF16 tail of " + std::to_string(bf16_tail) + " dims needs an FP8 " + name +
                         " and at most " + std::to_string(src.size(2)) + " dims");
  KITE_CUDA_OP_CHECK(
      cache.dim() == 4 && cache.size(2) == src.size(1) && cache.size(3) == src.size(2) + bf16_tail,
      op,
      std::string(name) + " " + shape_to_string(cache.shape()) +
          " must be [num_blocks, block_size, " + std::to_string(src.size(1)) + ", " +
          std::to_string(src.size(2) + bf16_tail) + "]");
}

}  // namespace

void rope(Tensor& x, int64_t rot_offset, int64_t rot_dim, const Tensor& cos, const Tensor& sin,
          ops::RopeStyle style, cudaStream_t stream) {
  constexpr const char* kOp = "rope";
  check_device_float(x, kOp, "x");
  check_rope_dims(kOp, x, rot_offset, rot_dim);
  check_cos_sin(kOp, cos, sin, x.size(0), rot_dim);
  const auto fill = [&](auto& args) {
    using T = std::remove_pointer_t<decltype(args.targets[0].x)>;
    args.targets[0] =
        make_target<T>(x, x.size(1), x.size(2), rot_offset, rot_dim, nullptr, x.size(0));
    args.num_targets = 1;
    args.cos = static_cast<const float*>(cos.raw());
    args.sin = static_cast<const float*>(sin.raw());
    args.rot_dim = static_cast<int>(rot_dim);
    args.interleaved = style == ops::RopeStyle::kInterleaved;
    launch(args, x.size(0), stream);
  };
  if (x.dtype() == DType::kF32) {
    RopeLaunch<float> args;
    fill(args);
  } else {
    RopeLaunch<bf16> args;
    fill(args);
  }
}

void write_cache(const Tensor& src, const Tensor& slot_mapping, Tensor& cache,
                 cudaStream_t stream) {
  constexpr const char* kOp = "write_cache";
  check_device_float(src, kOp, "src");
  check_device(cache, src.dtype(), kOp, "cache");
  check_device(slot_mapping, DType::kI64, kOp, "slot_mapping");
  KITE_CUDA_OP_CHECK(
      cache.dim() >= 3, kOp,
      "cache must be [num_blocks, block_size, ...], got " + shape_to_string(cache.shape()));
  const int64_t num_slots = cache.size(0) * cache.size(1);
  const int64_t width = num_slots == 0 ? 0 : cache.numel() / num_slots;
  const int64_t tokens = slot_mapping.numel();
  KITE_CUDA_OP_CHECK(src.dim() >= 1 && src.size(0) == tokens && src.numel() == tokens * width, kOp,
                     "src " + shape_to_string(src.shape()) + " must be " + std::to_string(tokens) +
                         " rows of " + std::to_string(width) + " values to fit cache " +
                         shape_to_string(cache.shape()));
  KITE_CUDA_OP_CHECK(width <= INT32_MAX, kOp, "rows too wide");
  if (width == 0) return;
  const auto fill = [&](auto& args) {
    using T = std::remove_pointer_t<decltype(args.targets[0].x)>;
    args.targets[0] = make_target<T>(src, 1, width, -1, 2, &cache, kFewTokens);
    args.num_targets = 1;
    args.slots = static_cast<const int64_t*>(slot_mapping.raw());
    args.num_slots = num_slots;
    launch(args, tokens, stream);
  };
  if (src.dtype() == DType::kF32) {
    RopeLaunch<float> args;
    fill(args);
  } else {
    RopeLaunch<bf16> args;
    fill(args);
  }
}

void rope_and_cache(const RopeCacheParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "rope_and_cache";
  KITE_CUDA_OP_CHECK(p.k && p.k_cache && p.cos && p.sin && p.slot_mapping, kOp,
                     "k, k_cache, cos, sin and slot_mapping are required");
  KITE_CUDA_OP_CHECK((p.v == nullptr) == (p.v_cache == nullptr), kOp,
                     "v and v_cache come together");
  check_device_float(*p.k, kOp, "k");
  const DType dtype = p.k->dtype();
  check_rope_dims(kOp, *p.k, p.k_rot_offset, p.rot_dim);
  const int64_t tokens = p.k->size(0);
  check_cos_sin(kOp, *p.cos, *p.sin, tokens, p.rot_dim);
  check_device(*p.slot_mapping, DType::kI64, kOp, "slot_mapping");
  KITE_CUDA_OP_CHECK(p.slot_mapping->numel() == tokens, kOp,
                     "slot_mapping needs one slot per token (" + std::to_string(tokens) + ")");
  check_cache(kOp, *p.k, *p.k_cache, "k_cache", p.k_bf16_tail);
  if (p.k_norm_weight) {
    check_device(*p.k_norm_weight, dtype, kOp, "k_norm_weight");
    KITE_CUDA_OP_CHECK(p.k_norm_width > 0 && p.k_norm_width <= p.k_rot_offset &&
                           p.k_norm_weight->numel() == p.k_norm_width,
                       kOp,
                       "k's norm must cover [0, width) before its rotary dims, with width " +
                           std::to_string(p.k_norm_width) + " weights");
  }
  if (p.q) {
    check_device(*p.q, dtype, kOp, "q");
    check_rope_dims(kOp, *p.q, p.q_rot_offset, p.rot_dim);
    KITE_CUDA_OP_CHECK(p.q->size(0) == tokens, kOp, "q and k must have the same tokens");
    if (p.q_out) {
      check_device(*p.q_out, dtype, kOp, "q_out");
      check_rope_dims(kOp, *p.q_out, p.q_out_offset, p.rot_dim);
      KITE_CUDA_OP_CHECK(p.q_out->size(0) == tokens && p.q_out->size(1) == p.q->size(1), kOp,
                         "q_out must have q's tokens and heads");
      KITE_CUDA_OP_CHECK(!bytes_overlap(*p.q, *p.q_out), kOp, "q_out must not overlap q");
    }
  } else {
    KITE_CUDA_OP_CHECK(p.q_out == nullptr, kOp, "q_out needs q");
  }
  if (p.v) {
    check_device(*p.v, dtype, kOp, "v");
    KITE_CUDA_OP_CHECK(p.v->dim() == 3 && p.v->size(0) == tokens && p.v->size(1) == p.k->size(1),
                       kOp, "v " + shape_to_string(p.v->shape()) + " must be [T, Hk, Dv]");
    check_cache(kOp, *p.v, *p.v_cache, "v_cache");
    KITE_CUDA_OP_CHECK(
        p.v_cache->size(0) == p.k_cache->size(0) && p.v_cache->size(1) == p.k_cache->size(1), kOp,
        "k_cache and v_cache must have the same blocks");
  }
  if (p.head_w) check_head_product(kOp, p);
  const int64_t num_slots = p.k_cache->size(0) * p.k_cache->size(1);
  if (dtype == DType::kF32) {
    launch_rope_cache<float>(p, tokens, num_slots, stream);
  } else {
    launch_rope_cache<bf16>(p, tokens, num_slots, stream);
  }
}

}  // namespace kite::cuda
