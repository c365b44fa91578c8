// Split-K paged decode attention (flash-decoding).
//
// Kernel 1, block (sequence s, query head h, split p): four warps share the split's keys
// [p * keys_per_split, ...), four keys at a time each, every warp keeping its own online
// softmax state; the block merges the four states in shared memory. With one split the block
// writes the normalised output; otherwise it writes its unnormalised partial (max m, sum l,
// acc) and kernel 2, block (s, h), rescales the partials to a common max and normalises.
// The last split runs to the sequence's real length, so a seq_len above args.max_seq_len is
// still attended in full (only the work is uneven).
#include <algorithm>

#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_launch.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/stream.h"

namespace kite::cuda {
namespace {

using attention::KernelParams;
constexpr int kWarps = 4;
constexpr int kMaxSplits = 256;
constexpr int64_t kMinKeysPerSplit = 256;

template <typename T, int DQK, int DV>
__global__ void __launch_bounds__(kWarps * 32) decode_split_kernel(const KernelParams p) {
  using namespace attention;
  using SQ = HeadSplit<T, DQK>;
  using SV = HeadSplit<T, DV>;
  __shared__ float sm_acc[kWarps][DV];
  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ int sm_bad[kWarps];

  const int seq = blockIdx.x / p.num_heads, head = blockIdx.x % p.num_heads;
  const int split = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);

  const int64_t seq_len = p.seq_lens[seq];
  const bool bad = seq_len < 0 || seq_len > int64_t{p.max_blocks_per_seq} * p.block_size;
  const int64_t len = bad ? 0 : seq_len;
  const int64_t k_begin = split * p.keys_per_split;
  const int64_t k_end = split == p.num_splits - 1 ? len : min(len, k_begin + p.keys_per_split);

  float q[SQ::kIters][SQ::kVec];
  load_row<T, DQK>(static_cast<const T*>(p.q) + (int64_t{seq} * p.num_heads + head) * DQK, lane, q);
#pragma unroll
  for (int it = 0; it < SQ::kIters; ++it)
#pragma unroll
    for (int j = 0; j < SQ::kVec; ++j) q[it][j] *= p.scale_log2;

  const KvCursor kv{p.block_tables + int64_t{seq} * p.max_blocks_per_seq,
                    p.block_size,
                    p.num_blocks,
                    p.k_slot_stride,
                    p.v_slot_stride,
                    kv_head * p.k_head_stride,
                    kv_head * p.v_head_stride};
  SoftmaxState<T, DV> st;
  st.bad = bad;
  attend_keys<T, DQK, DV>(st, q, static_cast<const T*>(p.k_cache), static_cast<const T*>(p.v_cache),
                          kv, k_begin + warp * kKeysPerStep, k_end, int64_t{kWarps} * kKeysPerStep,
                          lane);

  if (lane == 0) {
    sm_m[warp] = st.m;
    sm_l[warp] = st.l;
    sm_bad[warp] = st.bad;
  }
#pragma unroll
  for (int it = 0; it < SV::kIters; ++it) {
    if (!SV::owns(it, lane)) continue;
#pragma unroll
    for (int j = 0; j < SV::kVec; ++j) sm_acc[warp][SV::offset(it, lane) + j] = st.acc[it][j];
  }
  __syncthreads();

  float m = -INFINITY;
  bool any_bad = false;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    m = fmaxf(m, sm_m[w]);
    any_bad |= sm_bad[w] != 0;
  }
  float weight[kWarps];
  float l = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = sm_m[w] == -INFINITY ? 0.0f : exp2f(sm_m[w] - m);
    l += weight[w] * sm_l[w];
  }
  const int64_t row = int64_t{seq} * p.num_heads + head;
  if (p.num_splits == 1) {
    const bool valid = !any_bad && l > 0.0f;
    const float inv = valid ? 1.0f / l : __int_as_float(0x7fffffff);
    T* out = static_cast<T*>(p.out) + row * DV;
    for (int d = threadIdx.x; d < DV; d += blockDim.x) {
      float a = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) a += weight[w] * sm_acc[w][d];
      out[d] = from_float<T>(a * inv);
    }
    return;
  }
  const int64_t part = row * p.num_splits + split;
  float* acc_out = p.part_acc + part * DV;
  for (int d = threadIdx.x; d < DV; d += blockDim.x) {
    float a = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) a += weight[w] * sm_acc[w][d];
    acc_out[d] = a;
  }
  if (threadIdx.x == 0) {
    p.part_ml[part * 2] = m;
    p.part_ml[part * 2 + 1] = any_bad ? __int_as_float(0x7fffffff) : l;
  }
}

// Block (row = sequence x head, dim chunk): out = sum_p e_p acc_p / sum_p e_p l_p with
// e_p = exp2(m_p - max m).
// FEW (decode_combine_few: up to kFewSplits splits and kFewRows rows): every thread loads all
// splits' (max, sum) and its dim's partials at once and merges them in registers — one memory
// latency and no barriers, for a decode step at small batch (16-32 splits, the merge on its
// critical path). Its 135 registers a thread would cut the occupancy of a large merge (MLA
// prefill's thousands of rows: DeepSeek-V2-Lite's 512-token TTFT 18.6 -> 21.3 ms when every
// merge of at most 32 splits took it), so that keeps the block-wide form (32 registers), its own
// instantiation.
constexpr int kFewSplits = 32;
constexpr int64_t kFewRows = 512;
bool decode_combine_few(const KernelParams& p) {
  return p.num_splits <= kFewSplits && int64_t{p.num_seqs} * p.num_heads <= kFewRows;
}

template <typename T>
__device__ __forceinline__ void combine_few(const KernelParams& p, int64_t row, int d) {
  const float* ml = p.part_ml + row * p.num_splits * 2;
  const float* acc = p.part_acc + row * p.num_splits * p.head_dim_v + d;
  float m_s[kFewSplits], l_s[kFewSplits], a_s[kFewSplits];
#pragma unroll
  for (int s = 0; s < kFewSplits; ++s) {
    if (s < p.num_splits) {
      m_s[s] = ml[2 * s];
      l_s[s] = ml[2 * s + 1];
      a_s[s] = acc[int64_t{s} * p.head_dim_v];
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int s = 0; s < kFewSplits; ++s)
    if (s < p.num_splits) m = fmaxf(m, m_s[s]);
  float l = 0.0f, a = 0.0f;
#pragma unroll
  for (int s = 0; s < kFewSplits; ++s) {
    if (s < p.num_splits) {
      const float e = m_s[s] == -INFINITY ? 0.0f : exp2f(m_s[s] - m);
      l += e * l_s[s];  // a NaN sum (bad block id) poisons the row
      a += e * a_s[s];
    }
  }
  const bool valid = l > 0.0f;  // false for NaN and for no keys at all
  static_cast<T*>(p.out)[row * p.head_dim_v + d] =
      from_float<T>(valid ? a / l : __int_as_float(0x7fffffff));
}

// EARLY_NEXT: the next kernel may launch once this one's wait is over (the other small decode
// kernels' rule, launch_pdl.cuh); else only as its blocks exit. Exit is the default: the GEMV
// after the combine is o_proj, and an 8-bit bulk GEMV launched early streams its whole ring
// (~17 MB, all of Llama-3-8B's FP8 o_proj) while the combine's L2 reads wait behind those
// copies — the combine took 6.1 µs of a layer's critical path with an early o_proj and 2.4 with a
// late one, o_proj 2.4 µs more (FP8 batch 1 1.2 % faster a step; BF16, W4A16 and FP8 batch 4
// unchanged; BENCHMARKS.md, run 30). KITE_CUDA_COMBINE_LATE_TRIGGER=0 is the early form.
template <typename T, bool FEW, bool EARLY_NEXT>
__global__ void decode_combine_kernel(const KernelParams p) {
  __shared__ float weights[FEW ? 1 : kMaxSplits];
  __shared__ float scratch[32];
  pdl_wait();  // launched early (PDL): the partials come from before
  if constexpr (EARLY_NEXT) pdl_trigger();
  const int64_t row = blockIdx.x;
  if constexpr (FEW) {
    const int d = blockIdx.y * blockDim.x + threadIdx.x;
    if (d < p.head_dim_v) combine_few<T>(p, row, d);
    return;
  }
  const float* ml = p.part_ml + row * p.num_splits * 2;
  float local_max = -INFINITY;
  for (int s = threadIdx.x; s < p.num_splits; s += blockDim.x)
    local_max = fmaxf(local_max, ml[2 * s]);
  const float m = block_max(local_max, scratch);
  float local_l = 0.0f;
  for (int s = threadIdx.x; s < p.num_splits; s += blockDim.x) {
    const float e = ml[2 * s] == -INFINITY ? 0.0f : exp2f(ml[2 * s] - m);
    weights[s] = e;
    local_l += e * ml[2 * s + 1];  // a NaN sum (bad block id) poisons the row
  }
  const float l = block_sum(local_l, scratch);  // its barriers also publish `weights`
  const bool valid = l > 0.0f;                  // false for NaN and for no keys at all
  const float inv = valid ? 1.0f / l : __int_as_float(0x7fffffff);
  const float* acc = p.part_acc + row * p.num_splits * p.head_dim_v;
  T* out = static_cast<T*>(p.out) + row * p.head_dim_v;
  // Block y takes dims [y * blockDim.x, ...), one per thread: every split's partial of a dim is
  // requested before the first is added (unrolled), so a row costs about one memory latency
  // rather than one per split (at batch 1 the grid is only a few rows).
  const int d = blockIdx.y * blockDim.x + threadIdx.x;
  if (d >= p.head_dim_v) return;
  float a = 0.0f;
#pragma unroll 8
  for (int s = 0; s < p.num_splits; ++s) a += weights[s] * acc[int64_t{s} * p.head_dim_v + d];
  out[d] = from_float<T>(a * inv);
}

constexpr int kCombineThreads = 128;
dim3 combine_grid(const KernelParams& p) {
  return dim3(static_cast<unsigned>(p.num_seqs * p.num_heads),
              static_cast<unsigned>((p.head_dim_v + kCombineThreads - 1) / kCombineThreads));
}

// The merge launch, in registers where decode_combine_few takes it.
template <typename T>
void launch_combine(const KernelParams& p, cudaStream_t stream) {
  static const bool early_next = env_switched_off("KITE_CUDA_COMBINE_LATE_TRIGGER");
  const bool few = decode_combine_few(p);
  auto kernel =
      early_next
          ? (few ? decode_combine_kernel<T, true, true> : decode_combine_kernel<T, false, true>)
          : (few ? decode_combine_kernel<T, true, false> : decode_combine_kernel<T, false, false>);
  launch_pdl_if(pdl_for_small_kernels(), kernel, combine_grid(p), kCombineThreads, 0, stream, p);
  KITE_CUDA_CHECK_LAUNCH();
}

// Splits so that the grid has about four blocks per multiprocessor, each with at least
// kMinKeysPerSplit keys of the longest sequence.
int choose_splits(const PagedAttentionArgs& args, int64_t rows) {
  if (args.num_splits > 0) return std::min(args.num_splits, kMaxSplits);
  const int64_t target_blocks = 4 * int64_t{device_properties().multiProcessorCount};
  const int64_t wanted = (target_blocks + rows - 1) / rows;
  const int64_t useful =
      (std::max<int64_t>(args.max_seq_len, 1) + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  return static_cast<int>(std::clamp<int64_t>(std::min(wanted, useful), 1, kMaxSplits));
}

template <typename T, int DQK, int DV>
void run_decode(const KernelParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_seqs * p.num_heads), p.num_splits);
  decode_split_kernel<T, DQK, DV><<<grid, kWarps * 32, 0, stream>>>(p);
  KITE_CUDA_CHECK_LAUNCH();
  if (p.num_splits > 1) {
    launch_combine<T>(p, stream);
  }
}

}  // namespace

namespace attention {
void launch_decode_combine(const KernelParams& p, cudaStream_t stream) {
  launch_combine<bf16>(p, stream);
}
}  // namespace attention

bool decode_rope_covered(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache) {
  return q.dtype() == DType::kBF16 && k_cache.dtype() == DType::kBF16 &&
         v_cache.dtype() == DType::kBF16 && v_cache.raw() != k_cache.raw() && q.dim() == 3 &&
         k_cache.dim() == 4 && v_cache.dim() == 4 &&
         attention::decode_rope_dims(q.size(2), v_cache.size(3), false) &&
         k_cache.size(3) == q.size(2);
}

namespace {

// The DecodeRope of a call: its tensors' shapes, into p's rope fields.
void describe_rope(const DecodeRope& r, const Tensor& q, const Tensor& k_cache,
                   const Tensor& v_cache, const Tensor& out, KernelParams& p) {
  constexpr const char* kOp = "paged_decode_attention";
  KITE_CUDA_OP_CHECK(decode_rope_covered(q, k_cache, v_cache), kOp,
                     "the fused rope needs BF16 q and separate BF16 caches of head dims (64, 64) "
                     "or (128, 128)");
  KITE_CUDA_OP_CHECK(r.k && r.v && r.cos && r.sin && r.slots, kOp,
                     "the fused rope needs k, v, cos, sin and slots");
  const int64_t t = q.size(0), d = q.size(2);
  const Shape rows{t, k_cache.size(2), d};
  check_device(*r.k, DType::kBF16, kOp, "rope k");
  check_device(*r.v, DType::kBF16, kOp, "rope v");
  KITE_CUDA_OP_CHECK(r.k->shape() == rows && r.v->shape() == rows, kOp,
                     "rope k " + shape_to_string(r.k->shape()) + " and v " +
                         shape_to_string(r.v->shape()) + " must be " + shape_to_string(rows));
  for (const Tensor* cs : {r.cos, r.sin}) {
    check_device(*cs, DType::kF32, kOp, "rope cos/sin");
    KITE_CUDA_OP_CHECK(cs->dim() == 2 && cs->size(0) == t && cs->size(1) == d / 2, kOp,
                       "rope cos/sin " + shape_to_string(cs->shape()) + " must be [" +
                           std::to_string(t) + ", " + std::to_string(d / 2) + "]");
    // The kernel reads a lane's q columns as float2 pairs.
    KITE_CUDA_OP_CHECK(reinterpret_cast<uintptr_t>(cs->raw()) % 8 == 0, kOp,
                       "rope cos/sin must start 8-byte aligned");
  }
  check_device(*r.slots, DType::kI64, kOp, "rope slots");
  KITE_CUDA_OP_CHECK(
      r.slots->numel() == t, kOp,
      "rope slots need one entry per query, got " + std::to_string(r.slots->numel()));
  for (const Tensor* x : {r.k, r.v})
    KITE_CUDA_OP_CHECK(reinterpret_cast<uintptr_t>(x->raw()) % 4 == 0 && !bytes_overlap(*x, out) &&
                           !bytes_overlap(*x, k_cache) && !bytes_overlap(*x, v_cache),
                       kOp, "rope k / v must be 4-byte aligned, apart from out and the caches");
  p.rope_k = r.k->raw();
  p.rope_v = r.v->raw();
  p.rope_cos = static_cast<const float*>(r.cos->raw());
  p.rope_sin = static_cast<const float*>(r.sin->raw());
  p.rope_slots = static_cast<const int64_t*>(r.slots->raw());
  p.num_slots = k_cache.size(0) * k_cache.size(1);
}

}  // namespace

void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const PagedAttentionArgs& args, AttentionWorkspace& workspace,
                            Tensor& out, cudaStream_t stream, const DecodeRope* rope) {
  KernelParams p = attention::check_and_describe("paged_decode_attention", q, k_cache, v_cache,
                                                 args, out, /*decode=*/true);
  if (rope) describe_rope(*rope, q, k_cache, v_cache, out, p);
  if (p.num_seqs == 0 || p.num_heads == 0) return;
  if (!rope && attention::try_decode_mla(p, args, workspace, stream)) return;
  if (attention::try_decode_mma(p, args, workspace, stream)) return;
  KITE_CUDA_OP_CHECK(!rope, "paged_decode_attention", "no kernel took the fused rope");
  KITE_CUDA_OP_CHECK(!p.kv_fp8, "paged_decode_attention",
                     "FP8 caches need a tensor-core decode kernel for head dims (" +
                         std::to_string(p.head_dim_qk) + ", " + std::to_string(p.head_dim_v) + ")");
  const int64_t rows = int64_t{p.num_seqs} * p.num_heads;
  p.num_splits = choose_splits(args, rows);
  const int64_t max_len = std::max<int64_t>(args.max_seq_len, 1);
  // Whole steps of the four warps, so no warp starts a split mid-step.
  constexpr int64_t kStep = kWarps * attention::kKeysPerStep;
  p.keys_per_split = ((max_len + p.num_splits - 1) / p.num_splits + kStep - 1) / kStep * kStep;
  attention::reserve_split_partials(p, rows, workspace);
#define KITE_RUN_DECODE(DQK, DV)           \
  if (p.bf16) {                            \
    run_decode<bf16, DQK, DV>(p, stream);  \
  } else {                                 \
    run_decode<float, DQK, DV>(p, stream); \
  }
  KITE_ATTENTION_DISPATCH(p.head_dim_qk, p.head_dim_v, KITE_RUN_DECODE);
#undef KITE_RUN_DECODE
}

}  // namespace kite::cuda
