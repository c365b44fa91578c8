// Warp-level building blocks shared by the decode and prefill attention kernels.
//
// One warp owns one (query row, head) and a range of keys. The head vectors are spread over
// the lanes in aligned vectors: lane l holds vectors l, l+32, ... of the row (HeadSplit), so a
// warp reads a K or V row with coalesced accesses of up to 16 bytes. The warp keeps an online
// softmax state (running max m, sum l, and acc = sum p * v over its lanes' dims) in log2 units:
// q is pre-multiplied by scale * log2(e), so exp2 replaces exp. Keys are taken KU at a time so
// that KU row loads and KU dot-product reductions are in flight together.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace kite::cuda::attention {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kKeysPerStep = 4;  // KU

// Elements per access for a D-wide row of T: the widest power of two up to 16 bytes that
// divides D and still gives every lane at least one vector (falls back to 1).
template <typename T, int D>
constexpr int pick_vec() {
  for (int v = 16 / static_cast<int>(sizeof(T)); v > 1; v /= 2)
    if (D % v == 0 && D / v >= 32) return v;
  return 1;
}

template <typename T, int D>
struct HeadSplit {
  static constexpr int kVec = pick_vec<T, D>();
  static constexpr int kNumVecs = D / kVec;
  static constexpr int kIters = (kNumVecs + 31) / 32;
  static constexpr bool kFull = kNumVecs % 32 == 0;  // every lane has every iteration
  __device__ static bool owns(int it, int lane) { return kFull || it * 32 + lane < kNumVecs; }
  __device__ static int offset(int it, int lane) { return (it * 32 + lane) * kVec; }
};

// Loads this lane's part of a row into floats (zeros where the lane owns nothing).
template <typename T, int D>
__device__ __forceinline__ void load_row(
    const T* row, int lane, float (&dst)[HeadSplit<T, D>::kIters][HeadSplit<T, D>::kVec]) {
  using S = HeadSplit<T, D>;
#pragma unroll
  for (int it = 0; it < S::kIters; ++it) {
    if (S::owns(it, lane)) {
      const Vec<T, S::kVec> v = load_vec<T, S::kVec>(row + S::offset(it, lane));
#pragma unroll
      for (int j = 0; j < S::kVec; ++j) dst[it][j] = to_float(v.v[j]);
    } else {
#pragma unroll
      for (int j = 0; j < S::kVec; ++j) dst[it][j] = 0.0f;
    }
  }
}

// Where the keys of one sequence live. Key j is at cache slot
// block_table[j / block_size] * block_size + j % block_size.
struct KvCursor {
  const int32_t* block_table;  // this sequence's row of block ids
  int block_size;
  int num_blocks;
  int64_t k_slot_stride, v_slot_stride;  // elements from one slot to the next
  int64_t k_head_offset, v_head_offset;  // elements from a slot's start to this kv head

  // Slot of key j, or -1 when its block id is outside the cache.
  __device__ int64_t slot(int64_t j) const {
    const int32_t block = block_table[j / block_size];
    if (block < 0 || block >= num_blocks) return -1;
    return static_cast<int64_t>(block) * block_size + j % block_size;
  }
};

template <typename T, int DV>
struct SoftmaxState {
  using SV = HeadSplit<T, DV>;
  float m = -INFINITY;  // running max of scores (log2 units)
  float l = 0.0f;       // sum of exp2(score - m)
  float acc[SV::kIters][SV::kVec] = {};
  bool bad = false;  // a block id was out of range: the result must be NaN
};

// Folds keys base + u (u < KU, base + u < end) for base = first, first + step, ... < end
// into the warp's state. Every lane of the warp must call it with the same arguments.
template <typename T, int DQK, int DV>
__device__ void attend_keys(SoftmaxState<T, DV>& st,
                            const float (&q)[HeadSplit<T, DQK>::kIters][HeadSplit<T, DQK>::kVec],
                            const T* k_cache, const T* v_cache, const KvCursor& kv, int64_t first,
                            int64_t end, int64_t step, int lane) {
  using SK = HeadSplit<T, DQK>;
  using SV = HeadSplit<T, DV>;
  constexpr int KU = kKeysPerStep;
  for (int64_t base = first; base < end; base += step) {
    int64_t slots[KU];
    float scores[KU];
#pragma unroll
    for (int u = 0; u < KU; ++u) {
      slots[u] = base + u < end ? kv.slot(base + u) : -1;
      if (base + u < end && slots[u] < 0) st.bad = true;
    }
#pragma unroll
    for (int u = 0; u < KU; ++u) {
      float partial = 0.0f;
      if (slots[u] >= 0) {
        const T* row = k_cache + slots[u] * kv.k_slot_stride + kv.k_head_offset;
#pragma unroll
        for (int it = 0; it < SK::kIters; ++it) {
          if (!SK::owns(it, lane)) continue;
          const Vec<T, SK::kVec> k = load_vec<T, SK::kVec>(row + SK::offset(it, lane));
#pragma unroll
          for (int j = 0; j < SK::kVec; ++j) partial += q[it][j] * to_float(k.v[j]);
        }
      }
      scores[u] = partial;
    }
#pragma unroll
    for (int u = 0; u < KU; ++u) {
      scores[u] = warp_sum(scores[u]);
      if (slots[u] < 0) scores[u] = -INFINITY;
    }
    float m_new = st.m;
#pragma unroll
    for (int u = 0; u < KU; ++u) m_new = fmaxf(m_new, scores[u]);
    if (m_new == -INFINITY) continue;        // no valid key in this step (only with bad block ids)
    const float corr = exp2f(st.m - m_new);  // st.m == -inf gives 0
    st.l *= corr;
#pragma unroll
    for (int it = 0; it < SV::kIters; ++it)
#pragma unroll
      for (int j = 0; j < SV::kVec; ++j) st.acc[it][j] *= corr;
#pragma unroll
    for (int u = 0; u < KU; ++u) {
      if (slots[u] < 0) continue;
      const float p = exp2f(scores[u] - m_new);
      st.l += p;
      const T* row = v_cache + slots[u] * kv.v_slot_stride + kv.v_head_offset;
#pragma unroll
      for (int it = 0; it < SV::kIters; ++it) {
        if (!SV::owns(it, lane)) continue;
        const Vec<T, SV::kVec> v = load_vec<T, SV::kVec>(row + SV::offset(it, lane));
#pragma unroll
        for (int j = 0; j < SV::kVec; ++j) st.acc[it][j] += p * to_float(v.v[j]);
      }
    }
    st.m = m_new;
  }
}

// Writes acc / l (or NaN when bad or empty) to this lane's dims of an output row.
template <typename T, int DV>
__device__ void store_normalised(const SoftmaxState<T, DV>& st, T* out_row, int lane) {
  using SV = HeadSplit<T, DV>;
  const bool valid = !st.bad && st.l > 0.0f;
  const float inv = valid ? 1.0f / st.l : __int_as_float(0x7fffffff);
#pragma unroll
  for (int it = 0; it < SV::kIters; ++it) {
    if (!SV::owns(it, lane)) continue;
    Vec<T, SV::kVec> o;
#pragma unroll
    for (int j = 0; j < SV::kVec; ++j) o.v[j] = from_float<T>(st.acc[it][j] * inv);
    store_vec<T, SV::kVec>(out_row + SV::offset(it, lane), o);
  }
}

}  // namespace kite::cuda::attention
