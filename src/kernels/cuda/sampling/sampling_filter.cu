// sampling_filter (sampling_params_gpu.h): one 1024-thread block per row, working in place on
// the row of `filtered` (raw penalised logits first, -inf for tokens removed so far, z at the
// end).
//
// Penalties: integer atomics count the row's output ids (and flag prompt ids) in the row's
// counters; after a barrier, each history entry claims its id's counter with atomicExch, so
// the one claimant applies the penalty once and the counter is back at zero.
// top-k: a bisection over the 32-bit order keys finds the k-th largest key t (32 counting
// passes); keys above t stay, and of the keys equal to t the lowest ids fill the quota.
// top-p: a bisection finds the smallest key u whose mass strictly above (in double) is below
// top_p * total; keys above u stay, and equal keys stay in id order while the mass before them
// is below the target (the CPU sampler's walk). min-p: z >= log(min_p) (z of the best is 0).
#include <cfloat>
#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling/sampling_params_gpu.h"
#include "kernels/cuda/sampling/sampling_reduce.cuh"

namespace kite::cuda {
namespace {

using sampling::block_exclusive;
using sampling::block_total;
using sampling::order_key;

constexpr int kThreads = 1024;

struct FilterParams {
  const float *temperature, *top_p, *min_p, *rep, *freq, *presence;
  const int32_t* top_k;
  const int32_t *prompt_ids, *prompt_offsets, *output_ids, *output_offsets;  // null: none
  int32_t* counters;                                                         // [R, V]
  int vocab;
};

struct Shared {
  int ints[33];
  double doubles[33];
  float best_v[32];
  int best_i[32];
};

__device__ void apply_penalties(const FilterParams& p, int r, float* row) {
  const float rep = p.rep[r], freq = p.freq[r], presence = p.presence[r];
  if (p.output_ids == nullptr || (rep == 1.0f && freq == 0.0f && presence == 0.0f)) return;
  int32_t* cnt = p.counters + static_cast<int64_t>(r) * p.vocab;
  const int o0 = p.output_offsets[r], o1 = p.output_offsets[r + 1];
  const int p0 = p.prompt_offsets[r], p1 = p.prompt_offsets[r + 1];
  for (int i = o0 + threadIdx.x; i < o1; i += kThreads) {
    const int32_t id = p.output_ids[i];
    if (id >= 0 && id < p.vocab) atomicAdd(&cnt[id], 1);
  }
  if (rep != 1.0f) {
    for (int i = p0 + threadIdx.x; i < p1; i += kThreads) {
      const int32_t id = p.prompt_ids[i];
      if (id >= 0 && id < p.vocab) atomicOr(&cnt[id], 1 << 30);
    }
  }
  __syncthreads();
  const int n_out = o1 - o0, n_all = n_out + (p1 - p0);
  for (int i = threadIdx.x; i < n_all; i += kThreads) {
    const int32_t id = i < n_out ? p.output_ids[o0 + i] : p.prompt_ids[p0 + i - n_out];
    if (id < 0 || id >= p.vocab) continue;
    const int v = atomicExch(&cnt[id], 0);
    if (v == 0) continue;  // not counted (prompt id without repetition penalty) or claimed
    float l = row[id];
    if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
    const int count = v & ((1 << 30) - 1);
    if (count > 0) {
      l -= freq * static_cast<float>(count);
      l -= presence;
    }
    row[id] = l;
  }
  __syncthreads();
}

// Max logit and its lowest id (NaN never wins; a row of NaN/-inf gives id 0).
__device__ void row_argmax(const float* row, int vocab, Shared& sh, float& best, int& best_id) {
  float v = -INFINITY;
  int id = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (row[i] > v) v = row[i], id = i;  // strided ascending: the first max is the lowest id
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (ov > v || (ov == v && oi < id)) v = ov, id = oi;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.best_v[threadIdx.x >> 5] = v, sh.best_i[threadIdx.x >> 5] = id;
  __syncthreads();
  v = -INFINITY;
  id = INT_MAX;
  for (int w = 0; w < kThreads / 32; ++w)
    if (sh.best_v[w] > v || (sh.best_v[w] == v && sh.best_i[w] < id))
      v = sh.best_v[w], id = sh.best_i[w];
  best = v;
  best_id = id == INT_MAX ? 0 : id;
}

__device__ int count_keys_at_least(const float* row, int vocab, uint32_t key, Shared& sh) {
  int c = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) c += order_key(row[i]) >= key;
  return block_total(c, sh.ints);
}

// Of the tokens with order_key == key, keeps the first `quota` in id order, removes the rest.
__device__ void keep_first_equal(float* row, int vocab, uint32_t key, int quota, Shared& sh) {
  int base = 0;
  for (int c0 = 0; c0 < vocab; c0 += kThreads) {
    const int i = c0 + threadIdx.x;
    const int eq = i < vocab && order_key(row[i]) == key;
    int total;
    const int rank = block_exclusive(eq, sh.ints, total);
    if (eq && base + rank >= quota) row[i] = -INFINITY;
    base += total;
  }
  __syncthreads();
}

__device__ void top_k(float* row, int vocab, int k, Shared& sh) {
  uint32_t lo = 0, hi = 0xffffffffu;  // largest t with count(key >= t) >= k
  while (lo < hi) {
    // In 64 bits: hi - lo + 1 is 2^32 on the first step.
    const auto mid = static_cast<uint32_t>(lo + (uint64_t{hi} - lo + 1) / 2);
    if (count_keys_at_least(row, vocab, mid, sh) >= k)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int above = lo == 0xffffffffu ? 0 : count_keys_at_least(row, vocab, lo + 1, sh);
  const int equal = count_keys_at_least(row, vocab, lo, sh) - above;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (order_key(row[i]) < lo) row[i] = -INFINITY;
  __syncthreads();
  if (above + equal > k) keep_first_equal(row, vocab, lo, k - above, sh);
}

// Mass (double) of the tokens whose key is above `key`.
__device__ double mass_above(const float* row, int vocab, uint32_t key, float m, float inv_t,
                             Shared& sh) {
  double s = 0.0;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (order_key(row[i]) > key) s += expf((row[i] - m) * inv_t);
  return block_total(s, sh.doubles);
}

__device__ void top_p(float* row, int vocab, float top_p_value, float m, float inv_t, Shared& sh) {
  const double target = static_cast<double>(top_p_value) * mass_above(row, vocab, 0, m, inv_t, sh);
  uint32_t lo = 0, hi = 0xffffffffu;  // smallest u with mass_above(u) < target
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (mass_above(row, vocab, mid, m, inv_t, sh) < target)
      hi = mid;
    else
      lo = mid + 1;
  }
  double mass = mass_above(row, vocab, lo, m, inv_t, sh);
  const int equal = count_keys_at_least(row, vocab, lo, sh) -
                    (lo == 0xffffffffu ? 0 : count_keys_at_least(row, vocab, lo + 1, sh));
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (order_key(row[i]) < lo) row[i] = -INFINITY;
  __syncthreads();
  if (equal <= 1) return;
  // Equal keys: the CPU walk keeps one more while the mass before it is below the target.
  uint32_t bits = lo & 0x80000000u ? lo & 0x7fffffffu : ~lo;
  const float w = expf((__uint_as_float(bits) - m) * inv_t);
  int keep = 0;
  while (keep < equal && mass < target) mass += w, ++keep;
  if (keep < equal) keep_first_equal(row, vocab, lo, keep, sh);
}

__global__ void __launch_bounds__(kThreads)
    filter_kernel(const FilterParams p, const void* logits, bool is_bf16, float* filtered) {
  __shared__ Shared sh;
  const int r = blockIdx.x, vocab = p.vocab;
  float* row = filtered + static_cast<int64_t>(r) * vocab;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const int64_t at = static_cast<int64_t>(r) * vocab + i;
    row[i] = is_bf16 ? __bfloat162float(static_cast<const bf16*>(logits)[at])
                  : static_cast<const float*>(logits)[at];
  }
  __syncthreads();
  apply_penalties(p, r, row);
  float m;
  int best;
  row_argmax(row, vocab, sh, m, best);
  const float temp = p.temperature[r];
  if (temp == 0.0f || m == -INFINITY) {  // greedy, or nothing finite to draw from
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += kThreads) row[i] = i == best ? 0.0f : -INFINITY;
    return;
  }
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (row[i] != row[i]) row[i] = -INFINITY;  // NaN is never drawn
  __syncthreads();
  const float inv_t = fminf(1.0f / temp, FLT_MAX);
  const int k = p.top_k[r];
  if (k > 0 && k < vocab) top_k(row, vocab, k, sh);
  const float tp = p.top_p[r];
  if (tp < 1.0f) top_p(row, vocab, tp, m, inv_t, sh);
  const float mp = p.min_p[r];
  const float threshold = mp > 0.0f ? logf(mp) : -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float z = (row[i] - m) * inv_t;
    row[i] = (row[i] == -INFINITY || z < threshold) ? -INFINITY : z;
  }
}

template <typename T>
const T* ptr(const Tensor& t) {
  return static_cast<const T*>(t.raw());
}

}  // namespace

int32_t* SamplingWorkspace::counters(int64_t rows, int64_t vocab, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(rows) * vocab * sizeof(int32_t);
  if (counts_.size_bytes() < bytes) {
    counts_.reserve(bytes);
    KITE_CUDA_CHECK(cudaMemsetAsync(counts_.data(), 0, counts_.size_bytes(), stream));
  }
  return static_cast<int32_t*>(counts_.data());
}

void sampling_filter(const Tensor& logits, const GpuSamplingParams& params,
                     const GpuTokenHistory* history, SamplingWorkspace& workspace, Tensor& filtered,
                     cudaStream_t stream) {
  constexpr const char* op = "sampling_filter";
  check_device_float(logits, op, "logits");
  check_device(filtered, DType::kF32, op, "filtered");
  KITE_CUDA_OP_CHECK(logits.dim() == 2 && filtered.shape() == logits.shape(), op,
                     "logits and filtered must both be [R, vocab]");
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  KITE_CUDA_OP_CHECK(vocab > 0 && vocab < (int64_t{1} << 30) && rows < (int64_t{1} << 31), op,
                     "vocab must be in [1, 2^30)");
  KITE_CUDA_OP_CHECK(!bytes_overlap(logits, filtered), op, "filtered must not overlap logits");
  for (const Tensor* t :
       {&params.temperature, &params.top_p, &params.min_p, &params.repetition_penalty,
        &params.frequency_penalty, &params.presence_penalty}) {
    check_device(*t, DType::kF32, op, "sampling params");
    KITE_CUDA_OP_CHECK(t->numel() == rows, op, "every sampling param needs one value per row");
  }
  check_device(params.top_k, DType::kI32, op, "top_k");
  KITE_CUDA_OP_CHECK(params.top_k.numel() == rows, op, "top_k needs one value per row");
  if (rows == 0) return;
  FilterParams p{};
  p.temperature = ptr<float>(params.temperature);
  p.top_p = ptr<float>(params.top_p);
  p.min_p = ptr<float>(params.min_p);
  p.rep = ptr<float>(params.repetition_penalty);
  p.freq = ptr<float>(params.frequency_penalty);
  p.presence = ptr<float>(params.presence_penalty);
  p.top_k = ptr<int32_t>(params.top_k);
  p.vocab = static_cast<int>(vocab);
  if (history != nullptr) {
    for (const Tensor* t : {&history->prompt_ids, &history->prompt_offsets, &history->output_ids,
                            &history->output_offsets})
      check_device(*t, DType::kI32, op, "history");
    KITE_CUDA_OP_CHECK(
        history->prompt_offsets.numel() == rows + 1 && history->output_offsets.numel() == rows + 1,
        op, "history offsets need R + 1 entries");
    p.prompt_ids = ptr<int32_t>(history->prompt_ids);
    p.prompt_offsets = ptr<int32_t>(history->prompt_offsets);
    p.output_ids = ptr<int32_t>(history->output_ids);
    p.output_offsets = ptr<int32_t>(history->output_offsets);
    p.counters = workspace.counters(rows, vocab, stream);
  }
  filter_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      p, logits.raw(), logits.dtype() == DType::kBF16, filtered.data<float>());
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
