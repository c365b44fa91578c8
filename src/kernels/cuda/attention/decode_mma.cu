// Tensor-core split-K decode attention for BF16 GQA: each K/V row is read once per group of
// query heads that share its kv head.
//
// Block (sequence, kv head, head block of up to 16 of the group's query heads, key split): the
// head block's query rows are the M = 16 rows of an mma tile (rows past the group are zeros),
// keys come in tiles of 64 staged in shared memory by cp.async two stages deep, and warp w
// takes keys 16w .. 16w + 15 of every tile with its own online softmax (log2 units). At the
// end the four warps' states merge in shared memory; with one split the block writes the
// normalised rows, otherwise the partial (max, sum, acc) in decode.cu's layout, which its
// combine kernel merges. Decode is bandwidth-bound: the mma rows past the group are waste
// the tensor cores can afford, and what matters is that K/V are read once, 16 bytes at a
// time, with a tile in flight while the previous one is used. FP8 caches (KVF8): the raw codes
// are staged by cp.async in a ring of kFp8Stages tiles (three in flight while one is used: a
// tile is half the bytes, so it takes more of them to keep HBM busy), and each lane converts
// the codes it needs straight into fp16 fragments (fp8_raw_tile.cuh: exact, one cvt per two
// codes, no scale); q (times the softmax scale) and p are fp16 too, the MMAs fp16, and
// k_scale / v_scale are applied to the scores and the output in fp32.
//
// ROPE (BF16 caches, DQK == DV, neox style over the whole head; KernelParams::rope_k): the
// kernel also does the step's rope and cache write, one launch fewer a layer. Every block
// rotates q in its mma fragments (a pair's two columns sit in the same register of two
// fragments); the block(s) whose split holds a sequence's last key (the step's own) rotate that
// key, store it and the value at the step's slot, and put both into their tile's row in place
// of what the slot held. rotate_pair and the bf16 rounding are
// rope.cu's, so the result is the same bits as rope_and_cache followed by this kernel.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention/attention_launch.h"
#include "kernels/cuda/attention/fp8_raw_tile.cuh"
#include "kernels/cuda/attention/mma_tile.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/rope_pair.cuh"
#include "kernels/cuda/stream.h"

namespace kite::cuda::attention {
namespace {

using namespace mma;

constexpr int kThreads = 128;
constexpr int kWarps = 4;
constexpr int kRows = 16;    // query heads per block
constexpr int kBlockN = 64;  // keys per tile, 16 per warp
constexpr int kMaxSplits = 256;
constexpr int kFp8Stages = 4;  // raw FP8 tiles in the ring (KVF8)
constexpr float kLazyLog2 = 8.0f;  // how far a score may pass a row's reference max (log2)
// Row stride of the merge's fp32 accumulators: DV + 1 spreads a warp's stores over the banks
// (DV would put the 8 lanes of a fragment column on one bank: 8-way conflicts in ncu).
template <int DV>
constexpr int kAccStride = DV + 1;
// One key tile per split at least: a short context at batch 1 (8 kv heads) still spreads over
// ~100 blocks of one tile each instead of a few blocks walking 4+ tiles one after another.
// KITE_CUDA_DECODE_SPLIT_KEYS overrides it (an A/B switch; the last value was 256).
int64_t min_keys_per_split() {
  static const int64_t keys = min_keys_per_split_from_env("KITE_CUDA_DECODE_SPLIT_KEYS", kBlockN);
  return keys;
}

template <int DQK, int DV, bool KVF8>
struct DecodeLayout {
  static constexpr int kQBytes = kRows * DQK * 2;
  static constexpr int kElem = KVF8 ? 1 : 2;  // bytes per cached value in a stage
  static constexpr int kStages = KVF8 ? kFp8Stages : 2;
  static constexpr int kKBytes = kBlockN * DQK * kElem;
  static constexpr int kStageBytes = kBlockN * (DQK + DV) * kElem;
  // The merge reuses the stages: per warp, acc [16][kAccStride] then max and sum [16] each.
  static constexpr int kMergeBytes = kWarps * kRows * (kAccStride<DV> + 2) * 4;
  static_assert(kMergeBytes <= kStages * kStageBytes, "merge scratch must fit in the stages");
  static constexpr int kSmemBytes = kQBytes + kStages * kStageBytes;
};

// The address of value d of row `row` in a swizzled tile of D-wide bf16 rows.
template <int D>
__device__ __forceinline__ bf16* tile_value(char* tile, int row, int d) {
  return reinterpret_cast<bf16*>(tile + swz<D>(row, d / 8)) + d % 8;
}

// KVF8: the caches are FP8 (p.kv_fp8), a separate instantiation. ROPE: p.rope_k is set (the
// step's rope and cache write in this kernel; see the top).
template <int DQK, int DV, bool KVF8, bool ROPE>
__global__ void __launch_bounds__(kThreads)
    decode_mma_kernel(const KernelParams p, int head_blocks) {
  using L = DecodeLayout<DQK, DV, KVF8>;
  // A thread holds one rotary pair (dims i, i + DQK / 2) of the new key, or one value pair; q's
  // pairs are fragment kk's and fragment kk + kHalf / 16's same register.
  constexpr int kHalf = DQK / 2;
  static_assert(!ROPE || (!KVF8 && DQK == DV && DQK <= kThreads && kHalf % 16 == 0),
                "the fused rope takes BF16 caches and one rotary pair or value pair a thread");
  constexpr int kRotFrags = ROPE ? kHalf / 16 : 1;
  extern __shared__ __align__(128) char smem[];
  // Launched early (PDL): q and the step's own key come from the kernel before; then the next
  // may launch. Decode waits further down, after its first tile of only older keys is in
  // flight (KernelParams::decode_step); other launches (MLA prefill's virtual sequences come
  // from the kernel before) wait here.
  if (!p.decode_step) {
    pdl_wait();
    pdl_trigger();
  }
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int group = p.num_heads / p.num_kv_heads;
  const int hb = blockIdx.x % head_blocks;
  const int kv_head = (blockIdx.x / head_blocks) % p.num_kv_heads;
  const int seq = blockIdx.x / head_blocks / p.num_kv_heads;
  const int split = blockIdx.y;
  const int head0 = kv_head * group + hb * kRows;
  const int heads_here = min(kRows, group - hb * kRows);

  const int64_t seq_len = p.seq_lens[seq];
  const bool bad_seq = seq_len < 0 || seq_len > int64_t{p.max_blocks_per_seq} * p.block_size;
  const int64_t len = bad_seq ? 0 : seq_len;
  const int64_t k_begin = split * p.keys_per_split;
  const int64_t k_end = split == p.num_splits - 1 ? len : min(len, k_begin + p.keys_per_split);
  const int n_tiles =
      k_end > k_begin ? static_cast<int>((k_end - k_begin + kBlockN - 1) / kBlockN) : 0;
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
  char* sq = smem;
  // ROPE: cos / sin of the new key's pair i = tid (threads below kHalf), and of the q columns
  // this lane's fragments hold (fragment kk < kHalf / 16, columns kk * 16 + 2t + 8h and the one
  // after, h = 0, 1). They and the slots are the step's upload, read before the wait like
  // seq_lens.
  [[maybe_unused]] float rc = 0.0f, rs = 0.0f;
  [[maybe_unused]] float2 fc[kRotFrags][2], fs[kRotFrags][2];
  [[maybe_unused]] int64_t new_slot = -1;
  // Whether this block's keys hold the sequence's last (block-uniform), and where in its tiles.
  [[maybe_unused]] const bool owns_new = ROPE && len > 0 && len - 1 >= k_begin && len - 1 < k_end;
  [[maybe_unused]] const int new_tile = static_cast<int>((len - 1 - k_begin) / kBlockN);
  [[maybe_unused]] const int new_row = static_cast<int>((len - 1 - k_begin) % kBlockN);
  if constexpr (ROPE) {
    rc = p.rope_cos[int64_t{seq} * kHalf + tid % kHalf];
    rs = p.rope_sin[int64_t{seq} * kHalf + tid % kHalf];
    const float2* c2 = reinterpret_cast<const float2*>(p.rope_cos + int64_t{seq} * kHalf);
    const float2* s2 = reinterpret_cast<const float2*>(p.rope_sin + int64_t{seq} * kHalf);
#pragma unroll
    for (int kk = 0; kk < kRotFrags; ++kk)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        fc[kk][h] = c2[kk * 8 + t + 4 * h];
        fs[kk][h] = s2[kk * 8 + t + 4 * h];
      }
    if (owns_new && hb == 0) new_slot = p.rope_slots[seq];
  }
  // Stage i (of L::kStages) starts at smem + kQBytes + i * kStageBytes (computed, not an
  // array: a run-time index into a local array would put it on the stack).
  char* const stages = smem + L::kQBytes;

  const PagedKv kv{p.k_cache,
                   p.v_cache,
                   table,
                   p.block_size,
                   p.num_blocks,
                   p.k_slot_stride,
                   p.v_slot_stride,
                   kv_head * p.k_head_stride,
                   kv_head * p.v_head_stride,
                   KVF8,
                   p.k_scale,
                   p.v_scale};
  auto load_stage = [&](int j, char* dst) {
    return load_kv_tiles<DQK, DV, kBlockN, kThreads>(dst, dst + L::kKBytes, kv,
                                                     static_cast<int>(k_begin) + j * kBlockN,
                                                     static_cast<int>(k_end), tid);
  };
  // FP8: the first kStages - 1 tiles' raw codes (the first with q's rows, in one group).
  auto load_raw = [&](int j) {
    char* dst = stages + (j % L::kStages) * L::kStageBytes;
    return load_raw_fp8_tiles<DQK, DV, kBlockN, kThreads>(dst, dst + L::kKBytes, kv,
                                                          static_cast<int>(k_begin) + j * kBlockN,
                                                          static_cast<int>(k_end), tid);
  };
  // A BF16 first tile of only older keys goes out before the wait, in the same copy group as q.
  bool ok = true;
  const bool tile_before_wait = !KVF8 && p.decode_step && n_tiles > 0 && k_begin + kBlockN < len;
  if (tile_before_wait) ok = load_stage(0, stages);
  if (p.decode_step) {
    pdl_wait();
    pdl_trigger();
  }
  const bf16* q = static_cast<const bf16*>(p.q);
  for (int idx = tid; idx < kRows * (DQK / 8); idx += kThreads) {
    const int row = idx / (DQK / 8), chunk = idx % (DQK / 8);
    const bool valid = row < heads_here;
    const bf16* src = valid ? q + (int64_t{seq} * p.num_heads + head0 + row) * DQK + chunk * 8 : q;
    cp_async16(sq + swz<DQK>(row, chunk), src, valid);
  }
  if constexpr (KVF8) {
#pragma unroll
    for (int j = 0; j < L::kStages - 1; ++j) {
      if (j < n_tiles) ok &= load_raw(j);
      cp_async_commit();
    }
  } else {
    if (n_tiles > 0 && !tile_before_wait) ok = load_stage(0, stages);
    cp_async_commit();
  }
  // ROPE: the new key's rotary pair (threads below kHalf) or a value pair (the next DV / 2), read
  // once q's and the first tile's copies are in flight, rotated and rounded as rope.cu does, then
  // stored at the step's slot (hb 0 only: other head blocks of the kv head hold the same pair) and
  // kept for the tile row (below).
  [[maybe_unused]] bf16 new_a = bf16{}, new_b = bf16{};
  if constexpr (ROPE) {
    if (owns_new && tid < kHalf + DV / 2) {
      const int64_t row = int64_t{seq} * p.num_kv_heads + kv_head;
      if (tid < kHalf) {
        const bf16* k = static_cast<const bf16*>(p.rope_k) + row * DQK;
        const float2 r = rotate_pair(to_float(k[tid]), to_float(k[tid + kHalf]), rc, rs);
        new_a = from_float<bf16>(r.x);
        new_b = from_float<bf16>(r.y);
      } else {
        const bf16* v = static_cast<const bf16*>(p.rope_v) + row * DV + 2 * (tid - kHalf);
        new_a = v[0];
        new_b = v[1];
      }
      if (new_slot >= 0 && new_slot < p.num_slots) {
        if (tid < kHalf) {
          bf16* dst = static_cast<bf16*>(const_cast<void*>(p.k_cache)) +
                      new_slot * p.k_slot_stride + kv_head * p.k_head_stride;
          dst[tid] = new_a;
          dst[tid + kHalf] = new_b;
        } else {
          bf16* dst = static_cast<bf16*>(const_cast<void*>(p.v_cache)) +
                      new_slot * p.v_slot_stride + kv_head * p.v_head_stride + 2 * (tid - kHalf);
          dst[0] = new_a;
          dst[1] = new_b;
        }
      }
    }
  }

  uint32_t qf[DQK / 16][4];
  float o[DV / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  if constexpr (KVF8) {  // q * scale_log2 in fp16 (the scores then only need k_scale)
    cp_async_wait<L::kStages - 2>();
    __syncthreads();
    q_frags_perm<DQK>(qf, sq, g, t, p.scale_log2);
  } else {
    cp_async_wait<0>();
    __syncthreads();
    const uint32_t sq_addr = smem_addr(sq);
#pragma unroll
    for (int kk = 0; kk < DQK / 16; ++kk)
      ldmatrix_x4(qf[kk], a_addr<DQK>(sq_addr, 0, kk * 16, lane));
    if constexpr (ROPE) {  // q rotated in the fragments (register r of both: the same columns)
#pragma unroll
      for (int kk = 0; kk < kRotFrags; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          uint32_t& lo = qf[kk][r];
          uint32_t& hi = qf[kk + kRotFrags][r];
          const float2 a = unpack_bf16(lo), b = unpack_bf16(hi);
          const float2 c = fc[kk][r / 2], sn = fs[kk][r / 2];
          const float2 x = rotate_pair(a.x, b.x, c.x, sn.x), y = rotate_pair(a.y, b.y, c.y, sn.y);
          lo = pack_bf16(x.x, y.x);
          hi = pack_bf16(x.y, y.y);
        }
    }
  }
  const float score_scale = KVF8 ? p.k_scale : p.scale_log2;

  for (int j = 0; j < n_tiles; ++j) {
    if constexpr (KVF8) {
      // Tile j has landed (the groups after it are tiles j + 1 .. j + kStages - 2), and every
      // warp is done with tile j - 1, whose stage tile j + kStages - 1 now takes.
      cp_async_wait<L::kStages - 2>();
      __syncthreads();
      if (j + L::kStages - 1 < n_tiles) ok &= load_raw(j + L::kStages - 1);
      cp_async_commit();
    } else if (j + 1 < n_tiles) {
      ok &= load_stage(j + 1, stages + ((j + 1) & 1) * L::kStageBytes);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
    } else {
      cp_async_wait<0>();
      __syncthreads();
    }
    char* const stage = stages + (j % L::kStages) * L::kStageBytes;
    if constexpr (ROPE) {
      // The step's own key and value replace what the tile copied from the slot (stale: this
      // kernel stores them, above, without waiting for its own stores).
      if (owns_new && j == new_tile) {
        if (tid < kHalf) {
          *tile_value<DQK>(stage, new_row, tid) = new_a;
          *tile_value<DQK>(stage, new_row, tid + kHalf) = new_b;
        } else if (tid < kHalf + DV / 2) {
          *tile_value<DV>(stage + L::kKBytes, new_row, 2 * (tid - kHalf)) = new_a;
          *tile_value<DV>(stage + L::kKBytes, new_row, 2 * (tid - kHalf) + 1) = new_b;
        }
        __syncthreads();
      }
    }
    const uint32_t sk = smem_addr(stage);
    const uint32_t sv = sk + L::kKBytes;
    const int wkey = warp * 16;  // this warp's keys within the tile

    float s[2][4] = {};
    if constexpr (KVF8) {
#pragma unroll
      for (int pr = 0; pr < DQK / 32; ++pr)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          uint32_t b[4];
          k_frags<DQK>(b, stage, wkey + nt * 8 + g, pr, t);
          mma_16bit<true>(s[nt], qf[2 * pr], b[0], b[1]);
          mma_16bit<true>(s[nt], qf[2 * pr + 1], b[2], b[3]);
        }
    } else {
#pragma unroll
      for (int kk = 0; kk < DQK / 16; kk += 2) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          uint32_t b[4];
          ldmatrix_x4(b, kb_addr<DQK>(sk, wkey + nt * 8, kk * 16, lane));
          mma_16bit<false>(s[nt], qf[kk], b[0], b[1]);
          mma_16bit<false>(s[nt], qf[kk + 1], b[2], b[3]);
        }
      }
    }
    const int64_t key_base = k_begin + int64_t{j} * kBlockN + wkey;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = key_base + nt * 8 + 2 * t + (e & 1);
        s[nt][e] = key < k_end ? s[nt][e] * score_scale : -INFINITY;
      }
    // Lazy rescaling: a row's reference max m moves only when a score passes it by more than
    // kLazyLog2, so p = 2^(s - m) <= 2^kLazyLog2 (fine in fp16 / bf16, and l and o are fp32),
    // and the rescale of o (DV / 4 multiplies per thread) runs only in the warp's few tiles
    // where some row moved. The merge and the split combine use whatever m each warp kept.
    float mx[2];
#pragma unroll
    for (int r = 0; r < 2; ++r)
      mx[r] = quad_max(fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1])));
    const bool moves = mx[0] > m[0] + kLazyLog2 || mx[1] > m[1] + kLazyLog2;
    if (__any_sync(0xffffffffu, moves)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_new = mx[r] > m[r] + kLazyLog2 ? mx[r] : m[r];
        const float corr = m_new == m[r] ? 1.0f : exp2f(m[r] - m_new);  // 0 from -inf
        m[r] = m_new;
        l[r] *= corr;
#pragma unroll
        for (int dt = 0; dt < DV / 8; ++dt) {
          o[dt][2 * r] *= corr;
          o[dt][2 * r + 1] *= corr;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_use = m[r] == -INFINITY ? 0.0f : m[r];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - m_use);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - m_use);
        l[r] += s[nt][2 * r] + s[nt][2 * r + 1];
      }
    }
    auto pack = [](float lo, float hi) { return KVF8 ? pack_f16(lo, hi) : pack_bf16(lo, hi); };
    const uint32_t a[4] = {pack(s[0][0], s[0][1]), pack(s[0][2], s[0][3]), pack(s[1][0], s[1][1]),
                           pack(s[1][2], s[1][3])};
    if constexpr (KVF8) {
#pragma unroll
      for (int gp = 0; gp < DV / 32; ++gp) {
        uint32_t b[4][2];
        v_frags<DV>(b, stage + L::kKBytes, wkey, gp, g, t);
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) mma_16bit<true>(o[4 * gp + jj], a, b[jj][0], b[jj][1]);
      }
    } else {
#pragma unroll
      for (int dt = 0; dt < DV / 8; dt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vb_addr<DV>(sv, wkey, dt * 8, lane));
        mma_16bit<false>(o[dt], a, b[0], b[1]);
        mma_16bit<false>(o[dt + 1], a, b[2], b[3]);
      }
      __syncthreads();  // the next iteration refills this stage
    }
  }

  // Merge the four warps' states (the stages are free once every warp passes the barrier below:
  // FP8's last real copies were waited for before its last tile was used, and BF16's loop
  // ended on a barrier).
  const bool any_bad = __syncthreads_or(!ok) || bad_seq;
  constexpr int kAcc = kAccStride<DV>;
  float* sm_acc = reinterpret_cast<float*>(smem + L::kQBytes);  // [warp][row][kAcc]
  float* sm_m = sm_acc + kWarps * kRows * kAcc;                 // [warp][row]
  float* sm_l = sm_m + kWarps * kRows;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    const float total = quad_sum(l[r]);
    if (t == 0) {
      sm_m[warp * kRows + row] = m[r];
      sm_l[warp * kRows + row] = total;
    }
    float* acc = sm_acc + (warp * kRows + row) * kAcc;
#pragma unroll
    for (int dt = 0; dt < DV / 8; ++dt) {
      if constexpr (KVF8) {  // the P·V dim order of fp8_raw_tile.cuh
        acc[v_dim(dt, 2 * t)] = o[dt][2 * r];
        acc[v_dim(dt, 2 * t + 1)] = o[dt][2 * r + 1];
      } else {
        acc[dt * 8 + 2 * t] = o[dt][2 * r];
        acc[dt * 8 + 2 * t + 1] = o[dt][2 * r + 1];
      }
    }
  }
  __syncthreads();
  const float nan = __int_as_float(0x7fffffff);
  for (int idx = tid; idx < heads_here * DV; idx += kThreads) {
    const int row = idx / DV, d = idx % DV;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w * kRows + row]);
    float a = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = sm_m[w * kRows + row];
      const float e = mw == -INFINITY ? 0.0f : exp2f(mw - mx);
      a += e * sm_acc[(w * kRows + row) * kAcc + d];
      sum += e * sm_l[w * kRows + row];
    }
    if constexpr (KVF8) a *= p.v_scale;
    const int64_t out_row = int64_t{seq} * p.num_heads + head0 + row;
    if (p.num_splits == 1) {
      const float inv = (!any_bad && sum > 0.0f) ? 1.0f / sum : nan;
      static_cast<bf16*>(p.out)[out_row * DV + d] = __float2bfloat16_rn(a * inv);
    } else {
      const int64_t part = out_row * p.num_splits + split;
      p.part_acc[part * DV + d] = a;
      if (d == 0) {
        p.part_ml[part * 2] = mx;
        p.part_ml[part * 2 + 1] = any_bad ? nan : sum;
      }
    }
  }
}

template <int DQK, int DV, bool KVF8, bool ROPE>
void run_decode_mma_as(const KernelParams& p, int head_blocks, cudaStream_t stream) {
  constexpr int kSmem = DecodeLayout<DQK, DV, KVF8>::kSmemBytes;
  static const bool configured = [] {
    KITE_CUDA_CHECK(cudaFuncSetAttribute(decode_mma_kernel<DQK, DV, KVF8, ROPE>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(int64_t{p.num_seqs} * p.num_kv_heads * head_blocks),
                  p.num_splits);
  launch_pdl_if(pdl_for_small_kernels(), decode_mma_kernel<DQK, DV, KVF8, ROPE>, grid, kThreads,
                kSmem, stream, p, head_blocks);
  KITE_CUDA_CHECK_LAUNCH();
}

template <int DQK, int DV>
void run_decode_mma(const KernelParams& p, int head_blocks, cudaStream_t stream) {
  if (p.kv_fp8) {
    run_decode_mma_as<DQK, DV, true, false>(p, head_blocks, stream);
  } else if (p.rope_k) {
    if constexpr (DQK == DV) run_decode_mma_as<DQK, DV, false, true>(p, head_blocks, stream);
  } else {
    run_decode_mma_as<DQK, DV, false, false>(p, head_blocks, stream);
  }
}

}  // namespace

bool try_decode_mma(KernelParams& p, const PagedAttentionArgs& args, AttentionWorkspace& workspace,
                    cudaStream_t stream) {
  if (!p.bf16 || !mma_covers_head_dims(p.head_dim_qk, p.head_dim_v) || p.kv_bf16_tail != 0)
    return false;
  if (p.rope_k && !decode_rope_dims(p.head_dim_qk, p.head_dim_v, p.kv_fp8)) return false;
  const int group = p.num_heads / p.num_kv_heads;
  const int head_blocks = (group + kRows - 1) / kRows;
  const int64_t ctas = int64_t{p.num_seqs} * p.num_kv_heads * head_blocks;
  if (ctas > INT32_MAX) return false;
  // About four blocks per multiprocessor, each with at least min_keys_per_split() keys.
  const int64_t max_len = std::max<int64_t>(args.max_seq_len, 1);
  if (args.num_splits > 0) {
    p.num_splits = std::min(args.num_splits, kMaxSplits);
  } else {
    const int64_t target = 4 * int64_t{device_properties().multiProcessorCount};
    const int64_t wanted = (target + ctas - 1) / ctas;
    const int64_t useful = (max_len + min_keys_per_split() - 1) / min_keys_per_split();
    p.num_splits = static_cast<int>(std::clamp<int64_t>(std::min(wanted, useful), 1, kMaxSplits));
  }
  p.keys_per_split =
      ((max_len + p.num_splits - 1) / p.num_splits + kBlockN - 1) / kBlockN * kBlockN;
  const int64_t rows = int64_t{p.num_seqs} * p.num_heads;
  reserve_split_partials(p, rows, workspace);
  if (p.head_dim_qk == 128) {
    run_decode_mma<128, 128>(p, head_blocks, stream);
  } else if (p.head_dim_qk == 64) {
    run_decode_mma<64, 64>(p, head_blocks, stream);
  } else {
    run_decode_mma<192, 128>(p, head_blocks, stream);
  }
  if (p.num_splits > 1) launch_decode_combine(p, stream);
  return true;
}

}  // namespace kite::cuda::attention
