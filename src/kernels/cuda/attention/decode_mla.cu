// Tensor-core split-K decode attention for absorbed MLA in BF16: one 576-wide latent cache row
// per key (kv head count 1) whose first 512 dims are the value, any number of query heads. An
// FP8 cache (its rope key's 64 values BF16 at the row's end) is converted into the same BF16
// tiles as it is loaded.
//
// Block (sequence, key split, head block of 16 * HB query heads; head block fastest, so the
// blocks that read one sequence's latent run together and share it through L2), WARPS warps.
// Keys come in tiles of 32 latent rows, staged by cp.async STAGES deep; V is read from the same
// tile (its first 512 columns), so the latent is read once per head block. Per tile:
//   1. the (16-head group, 8-key n-tile) score blocks are dealt out to the warps (mma over the
//      576 dims, Q fragments from shared memory) and stored, scaled, in shared memory;
//   2. after a barrier every warp reads the whole score tile in A-fragment order and runs the
//      same online softmax (so all warps agree on each row's max and sum);
//   3. warp w multiplies P by V's columns [w * 512 / WARPS, (w + 1) * 512 / WARPS) into its
//      own accumulators, for all 16 * HB heads.
// Each warp thus owns a slice of the output rows, and no merge between warps is needed.
// HB = 1 (16 heads, 4 warps, two blocks per SM) is what runs: HB = 4 (64 heads per block,
// reading the latent twice instead of 8 times for 128 heads) measured slower (try_decode_mla).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/cuda/attention/attention_launch.h"
#include "kernels/cuda/attention/fp8_raw_tile.cuh"
#include "kernels/cuda/attention/mma_tile.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/stream.h"

namespace kite::cuda::attention {
namespace {

using namespace mma;

constexpr int kBlockN = 32;  // keys per tile: four n-tiles of 8
constexpr int kDqk = kMlaDqk, kDv = kMlaDv;
constexpr int kStageBytes = kBlockN * kDqk * 2;
constexpr int kMaxSplits = 256;
// The fewest keys a split takes, for the longest context `len` (in decode steps, its length
// bucket: a power of two from 256, step_graphs.h): sqrt(len) rounded to whole key tiles (at
// least one), so about sqrt(len) splits, balancing the split blocks' work (len / S) against
// the combine's (S partial rows per head). DeepSeek-V2-Lite (one 16-head block per sequence;
// BENCHMARKS.md run 18) was faster at 32 keys than at 64 in the 1024 bucket (batch 1 and 4),
// at 64 than 128 in the 4096 one and at 128 than 256 in the 16384 one, by 1-5 %: the decode
// kernel launched early with its first tile in flight before the wait, and a merge in
// registers, made short splits cheaper than run 8's rule (2 sqrt(len)) had found them. Larger
// batches are held to about four blocks per multiprocessor before this matters.
// KITE_CUDA_MLA_SPLIT_KEYS=N fixes N (an A/B switch).
int64_t min_keys_per_split(int64_t len) {
  static const bool fixed = std::getenv("KITE_CUDA_MLA_SPLIT_KEYS") != nullptr;
  static const int64_t fixed_keys =
      min_keys_per_split_from_env("KITE_CUDA_MLA_SPLIT_KEYS", kBlockN);
  if (fixed) return fixed_keys;
  const auto keys = static_cast<int64_t>(std::sqrt(static_cast<double>(len)));
  return std::max<int64_t>(kBlockN, (keys + kBlockN / 2) / kBlockN * kBlockN);
}

template <int HB, int WARPS, int STAGES>
struct MlaLayout {
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kRows = 16 * HB;
  static constexpr int kDvPerWarp = kDv / WARPS;
  static constexpr int kPairsPerWarp = HB * (kBlockN / 8) / WARPS;  // score blocks per warp
  static_assert(kPairsPerWarp * WARPS == HB * (kBlockN / 8), "score blocks must split evenly");
  static constexpr int kQBytes = kRows * kDqk * 2;
  static constexpr int kScoreBytes = kRows * kBlockN * 4;
  static constexpr int kSmemBytes = kQBytes + STAGES * kStageBytes + kScoreBytes;
};

// An FP8 latent tile in two steps, as Fp8KvFetch does for the prefill kernel: fetch() starts
// this thread's plain loads of its rows' raw bytes into registers, store() converts them into
// the BF16 tile after the current tile's work, so the loads' latency hides behind it (the
// synchronous load_kv_tiles left every warp waiting on memory once per tile). Thread tid takes
// rows tid / 8 + (THREADS / 8) i and their 8-value chunks c0 + 8 j (c0 = tid % 8): chunks
// 0..63 are FP8 codes, and chunk 64 + c0 is too unless the row keeps its last 64 values (the
// rope key) as BF16 (kv.k_tail == 64, the model's layout: 512 codes + 128 bytes).
template <int THREADS>
struct LatentFp8Fetch {
  static constexpr int kPasses = kBlockN / (THREADS / 8);
  static constexpr int kCoded = kDv;  // the codes before a tail: the value dims
  uint2 codes[kPasses][kCoded / 64];
  uint4 last[kPasses];  // chunk 64 + c0: 16 bytes of BF16, or 8 bytes of codes in .x / .y

  __device__ __forceinline__ bool fetch(const PagedKv& kv, int key0, int valid_end, int tid) {
    const int c0 = tid % 8;
    return for_each_kv_row<kBlockN, THREADS>(
        kv, key0, valid_end, tid, [&](int i, int, bool valid, int64_t k_at, int64_t) {
          const uint8_t* src = static_cast<const uint8_t*>(kv.k_cache) + k_at;
#pragma unroll
          for (int j = 0; j < kCoded / 64; ++j)
            codes[i][j] = valid ? __ldg(reinterpret_cast<const uint2*>(src + (c0 + 8 * j) * 8))
                                : make_uint2(0, 0);
          if (!valid) {
            last[i] = make_uint4(0, 0, 0, 0);
          } else if (kv.k_tail) {
            last[i] = __ldg(reinterpret_cast<const uint4*>(src + kCoded + c0 * 16));
          } else {
            const uint2 w = __ldg(reinterpret_cast<const uint2*>(src + kCoded + c0 * 8));
            last[i] = make_uint4(w.x, w.y, 0, 0);
          }
        });
  }

  // The codes go in unscaled (every E4M3 value is a BF16 one, so this is exact): the kernel
  // applies k_scale to the scores' latent part and to the output instead, which saves the
  // multiplies of every converted value (the conversion is what an FP8 tile costs).
  __device__ __forceinline__ void store(char* tile, const PagedKv& kv, int tid) const {
    const int c0 = tid % 8;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int row = tid / 8 + i * (THREADS / 8);
#pragma unroll
      for (int j = 0; j < kCoded / 64; ++j)
        codes_to_bf16(tile + swz<kDqk>(row, c0 + 8 * j), codes[i][j]);
      char* dst = tile + swz<kDqk>(row, kCoded / 8 + c0);
      if (kv.k_tail)
        *reinterpret_cast<uint4*>(dst) = last[i];
      else
        codes_to_bf16(dst, make_uint2(last[i].x, last[i].y));
    }
  }

  // 8 E4M3 codes -> their exact BF16 values (16 bytes at dst): one cvt to fp16 per two codes,
  // then to fp32 and BF16.
  __device__ __forceinline__ static void codes_to_bf16(char* dst, uint2 raw) {
    uint4 out;
    uint32_t* o = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const uint32_t word = w == 0 ? raw.x : raw.y;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t f16 = e4m3x2_to_f16x2(word >> (16 * h));
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&f16));
        const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
        o[2 * w + h] = *reinterpret_cast<const uint32_t*>(&b);
      }
    }
    *reinterpret_cast<uint4*>(dst) = out;
  }
};

// KVF8: an FP8 latent cache (LatentFp8Fetch into the same BF16 tiles; STAGES must be 2: the
// tile in use and the one being stored).
template <int HB, int WARPS, int STAGES, bool KVF8>
__global__ void __launch_bounds__(WARPS * 32)
    decode_mla_kernel(const KernelParams p, int head_blocks) {
  static_assert(!KVF8 || STAGES == 2, "the FP8 path keeps one tile in registers");
  using L = MlaLayout<HB, WARPS, STAGES>;
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
  const int hblock = blockIdx.x % head_blocks, seq = blockIdx.x / head_blocks;
  const int split = blockIdx.y;
  const int head0 = hblock * L::kRows;
  const int heads_here = min(L::kRows, p.num_heads - head0);

  const int64_t seq_len = p.seq_lens[seq];
  const bool bad_seq = seq_len < 0 || seq_len > int64_t{p.max_blocks_per_seq} * p.block_size;
  const int64_t len = bad_seq ? 0 : seq_len;
  const int64_t k_begin = split * p.keys_per_split;
  const int64_t k_end = split == p.num_splits - 1 ? len : min(len, k_begin + p.keys_per_split);
  const int n_tiles =
      k_end > k_begin ? static_cast<int>((k_end - k_begin + kBlockN - 1) / kBlockN) : 0;
  char* const sq = smem;
  char* const stages = smem + L::kQBytes;
  float* const sS = reinterpret_cast<float*>(stages + STAGES * kStageBytes);  // [rows][32]

  const PagedKv kv{
      p.k_cache,
      nullptr,
      p.block_tables + int64_t{p.row_seq ? p.row_seq[seq] : seq} * p.max_blocks_per_seq,
      p.block_size,
      p.num_blocks,
      p.k_slot_stride,
      0,
      0,
      0,
      p.kv_fp8,
      p.k_scale,
      p.k_scale,
      p.kv_bf16_tail};
  bool ok = true;
  auto issue_tile = [&](int j) {
    if (j < n_tiles)
      ok &= load_kv_tiles<kDqk, 0, kBlockN, L::kThreads>(
          stages + (j % STAGES) * kStageBytes, nullptr, kv, static_cast<int>(k_begin) + j * kBlockN,
          static_cast<int>(k_end), tid);
  };
  auto load_tile = [&](int j) {
    issue_tile(j);
    cp_async_commit();  // empty groups keep the count uniform
  };
  // A BF16 first tile of only older keys goes out before the wait, in the same copy group as q.
  const bool tile_before_wait = !KVF8 && p.decode_step && n_tiles > 0 && k_begin + kBlockN < len;
  if (tile_before_wait) issue_tile(0);
  if (p.decode_step) {
    pdl_wait();
    pdl_trigger();
  }
  const bf16* q = static_cast<const bf16*>(p.q);
  for (int idx = tid; idx < L::kRows * (kDqk / 8); idx += L::kThreads) {
    const int row = idx / (kDqk / 8), chunk = idx % (kDqk / 8);
    const bool valid = row < heads_here;
    const bf16* src = valid ? q + (int64_t{seq} * p.num_heads + head0 + row) * kDqk + chunk * 8 : q;
    cp_async16(sq + swz<kDqk>(row, chunk), src, valid);
  }
  LatentFp8Fetch<L::kThreads> f8;
  auto fetch_fp8 = [&](int j) {
    if (j < n_tiles)
      ok &= f8.fetch(kv, static_cast<int>(k_begin) + j * kBlockN, static_cast<int>(k_end), tid);
  };
  if constexpr (KVF8) {
    fetch_fp8(0);
    if (n_tiles > 0) f8.store(stages, kv, tid);
    cp_async_commit();  // Q's copies
  } else {
    if (tile_before_wait) cp_async_commit();  // tile 0's group, now with q's copies
#pragma unroll
    for (int s = tile_before_wait ? 1 : 0; s < STAGES - 1; ++s) load_tile(s);
  }

  float o[HB][L::kDvPerWarp / 8][4] = {};
  float m[HB][2], l[HB][2];
#pragma unroll
  for (int h = 0; h < HB; ++h) m[h][0] = m[h][1] = -INFINITY, l[h][0] = l[h][1] = 0.0f;
  const uint32_t sq_addr = smem_addr(sq);

  for (int j = 0; j < n_tiles; ++j) {
    if constexpr (KVF8) {
      cp_async_wait<0>();  // Q
      __syncthreads();     // tile j stored; every warp is done with tile j - 1 and the scores
      fetch_fp8(j + 1);    // into registers, stored below once tile j is done
    } else {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // tile j landed; every warp is done with tile j - 1 and the scores
      load_tile(j + STAGES - 1);
    }
    const uint32_t sk = smem_addr(stages + (j % STAGES) * kStageBytes);
    const int64_t tile_key0 = k_begin + int64_t{j} * kBlockN;

    // 1. This warp's score blocks.
#pragma unroll
    for (int pi = 0; pi < L::kPairsPerWarp; ++pi) {
      const int pair = warp + pi * WARPS, h = pair / (kBlockN / 8), nt = pair % (kBlockN / 8);
      float s[4] = {};
      auto qk = [&](float(&acc)[4], int kk) {  // k-steps kk and kk + 1 (32 dims) into acc
        uint32_t a0[4], a1[4], b[4];
        ldmatrix_x4(a0, a_addr<kDqk>(sq_addr, h * 16, kk * 16, lane));
        ldmatrix_x4(a1, a_addr<kDqk>(sq_addr, h * 16, kk * 16 + 16, lane));
        ldmatrix_x4(b, kb_addr<kDqk>(sk, nt * 8, kk * 16, lane));
        mma_bf16(acc, a0, b[0], b[1]);
        mma_bf16(acc, a1, b[2], b[3]);
      };
      if constexpr (KVF8) {
        // Unscaled codes (LatentFp8Fetch::store): the latent's dims times k_scale, the rope
        // key's too unless it is the BF16 tail (its true values).
        float sr[4] = {};
#pragma unroll 4
        for (int kk = 0; kk < kDv / 16; kk += 2) qk(s, kk);
#pragma unroll
        for (int kk = kDv / 16; kk < kDqk / 16; kk += 2) qk(sr, kk);
        const float rope_scale = kv.k_tail ? 1.0f : kv.k_scale;
#pragma unroll
        for (int e = 0; e < 4; ++e) s[e] = s[e] * kv.k_scale + sr[e] * rope_scale;
      } else {
#pragma unroll 6
        for (int kk = 0; kk < kDqk / 16; kk += 2) qk(s, kk);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        const int row = h * 16 + g + (e >= 2 ? 8 : 0);
        sS[row * kBlockN + col] = tile_key0 + col < k_end ? s[e] * p.scale_log2 : -INFINITY;
      }
    }
    __syncthreads();

    // 2. P for every head group in A-fragment order, the same online softmax in every warp.
    uint32_t a[HB][2][4];  // [head group][k-step]
#pragma unroll
    for (int h = 0; h < HB; ++h) {
      float pr[2][2][4];  // [row half][k-step][cols 2t, 2t+1, 2t+8, 2t+9]
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
          const float* rowp = sS + (h * 16 + g + 8 * r) * kBlockN + ks * 16 + 2 * t;
          pr[r][ks][0] = rowp[0];
          pr[r][ks][1] = rowp[1];
          pr[r][ks][2] = rowp[8];
          pr[r][ks][3] = rowp[9];
        }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = -INFINITY;
#pragma unroll
        for (int ks = 0; ks < 2; ++ks)
#pragma unroll
          for (int i = 0; i < 4; ++i) mx = fmaxf(mx, pr[r][ks][i]);
        mx = quad_max(mx);
        const float m_new = fmaxf(m[h][r], mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float corr = exp2f(m[h][r] - m_use);
        m[h][r] = m_new;
        l[h][r] *= corr;
#pragma unroll
        for (int dt = 0; dt < L::kDvPerWarp / 8; ++dt) {
          o[h][dt][2 * r] *= corr;
          o[h][dt][2 * r + 1] *= corr;
        }
#pragma unroll
        for (int ks = 0; ks < 2; ++ks)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            pr[r][ks][i] = exp2f(pr[r][ks][i] - m_use);
            l[h][r] += pr[r][ks][i];
          }
      }
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        a[h][ks][0] = pack_bf16(pr[0][ks][0], pr[0][ks][1]);
        a[h][ks][1] = pack_bf16(pr[1][ks][0], pr[1][ks][1]);
        a[h][ks][2] = pack_bf16(pr[0][ks][2], pr[0][ks][3]);
        a[h][ks][3] = pack_bf16(pr[1][ks][2], pr[1][ks][3]);
      }
    }

    // 3. O[:, this warp's columns] += P · V, each V fragment used by every head group.
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
#pragma unroll
      for (int dt = 0; dt < L::kDvPerWarp / 8; dt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vb_addr<kDqk>(sk, ks * 16, warp * L::kDvPerWarp + dt * 8, lane));
#pragma unroll
        for (int h = 0; h < HB; ++h) {
          mma_bf16(o[h][dt], a[h][ks], b[0], b[1]);
          mma_bf16(o[h][dt + 1], a[h][ks], b[2], b[3]);
        }
      }
    }
    // Tile j + 1 into the other stage (its last reader, tile j - 1, is behind the barrier).
    if constexpr (KVF8)
      if (j + 1 < n_tiles) f8.store(stages + ((j + 1) % STAGES) * kStageBytes, kv, tid);
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the block exits

  const bool any_bad = __syncthreads_or(!ok) || bad_seq;
  const float nan = __int_as_float(0x7fffffff);
#pragma unroll
  for (int h = 0; h < HB; ++h) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = h * 16 + g + 8 * r;
      const float total = quad_sum(l[h][r]);
      if (row >= heads_here) continue;
      const int64_t out_row = int64_t{seq} * p.num_heads + head0 + row;
      const int col0 = warp * L::kDvPerWarp + 2 * t;
      // FP8: P was multiplied with the unscaled codes, so the value scale comes in here (the
      // split partials are combined linearly, so they take it too).
      const float v_scale = KVF8 ? kv.k_scale : 1.0f;
      if (p.num_splits == 1) {
        const float inv = (!any_bad && total > 0.0f) ? v_scale / total : nan;
        bf16* dst = static_cast<bf16*>(p.out) + out_row * kDv + col0;
#pragma unroll
        for (int dt = 0; dt < L::kDvPerWarp / 8; ++dt)
          *reinterpret_cast<uint32_t*>(dst + dt * 8) =
              pack_bf16(o[h][dt][2 * r] * inv, o[h][dt][2 * r + 1] * inv);
      } else {
        const int64_t part = out_row * p.num_splits + split;
        float* dst = p.part_acc + part * kDv + col0;
#pragma unroll
        for (int dt = 0; dt < L::kDvPerWarp / 8; ++dt)
          *reinterpret_cast<float2*>(dst + dt * 8) =
              make_float2(o[h][dt][2 * r] * v_scale, o[h][dt][2 * r + 1] * v_scale);
        if (warp == 0 && t == 0) {
          p.part_ml[part * 2] = m[h][r];
          p.part_ml[part * 2 + 1] = any_bad ? nan : total;
        }
      }
    }
  }
}

template <int HB, int WARPS, int STAGES, bool KVF8>
void run_decode_mla_as(const KernelParams& p, int head_blocks, cudaStream_t stream) {
  using L = MlaLayout<HB, WARPS, STAGES>;
  static const bool configured = [] {
    KITE_CUDA_CHECK(cudaFuncSetAttribute(decode_mla_kernel<HB, WARPS, STAGES, KVF8>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         L::kSmemBytes));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(int64_t{p.num_seqs} * head_blocks), p.num_splits);
  launch_pdl_if(pdl_for_small_kernels(), decode_mla_kernel<HB, WARPS, STAGES, KVF8>, grid,
                L::kThreads, L::kSmemBytes, stream, p, head_blocks);
  KITE_CUDA_CHECK_LAUNCH();
}

template <int HB, int WARPS, int STAGES>
void run_decode_mla(const KernelParams& p, int head_blocks, cudaStream_t stream) {
  if (p.kv_fp8)
    run_decode_mla_as<HB, WARPS, STAGES, true>(p, head_blocks, stream);
  else
    run_decode_mla_as<HB, WARPS, STAGES, false>(p, head_blocks, stream);
}

// BF16 latent rows, or FP8 ones (dequantized into the BF16 tiles: LatentFp8Fetch) with or
// without their 64-dim rope key kept as BF16 (p.kv_bf16_tail, the model's FP8 cache).
bool covers_mla(const KernelParams& p) {
  const bool shared = p.v_cache == p.k_cache && p.v_slot_stride == p.k_slot_stride;
  const bool tail_ok = p.kv_bf16_tail == 0 || (p.kv_fp8 && p.kv_bf16_tail == kDqk - kDv);
  return p.bf16 && p.head_dim_qk == kDqk && p.head_dim_v == kDv && p.num_kv_heads == 1 && shared &&
         tail_ok;
}

// Token t of a prefill batch: its sequence (the last s with query_start[s] <= t) and how many
// keys it sees (its causal prefix, itself included).
__global__ void virtual_sequences_kernel(const int32_t* __restrict__ query_start,
                                         const int32_t* __restrict__ seq_lens, int num_seqs,
                                         int num_tokens, int32_t* __restrict__ row_seq,
                                         int32_t* __restrict__ lens) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= num_tokens) return;
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (query_start[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int q_len = query_start[lo + 1] - query_start[lo];
  row_seq[t] = lo;
  lens[t] = seq_lens[lo] - q_len + (t - query_start[lo]) + 1;
}

// Chooses p's split fields, reserves `extra_bytes` (handed to `prepare`, which runs first) and
// the split partials in one reservation (a workspace without an allocator hands out one buffer
// per reservation), and launches.
template <typename Prepare>
bool run_mla(KernelParams& p, const PagedAttentionArgs& args, AttentionWorkspace& workspace,
             size_t extra_bytes, const Prepare& prepare, cudaStream_t stream) {
  // 16-head groups per block. Measured on the H200 (NOTES.md, 2026-11-29): for 128 heads,
  // blocks of 64 heads (HB 4, 8 warps, 3 stages, one block per SM) ran 714 us against 638 us
  // for blocks of 16 (HB 1, two blocks per SM): MLA with 128 heads is compute-bound (240
  // flops per latent byte), and the larger block only lowered occupancy. So HB stays 1 until
  // a wgmma version; the template keeps HB for that experiment.
  const int hb = 1;
  const int head_blocks = (p.num_heads + 16 * hb - 1) / (16 * hb);
  const int64_t ctas = int64_t{p.num_seqs} * head_blocks;
  if (ctas > INT32_MAX) return false;
  const int64_t max_len = std::max<int64_t>(args.max_seq_len, 1);
  if (args.num_splits > 0) {
    p.num_splits = std::min(args.num_splits, kMaxSplits);
  } else {
    const int64_t target = 4 * int64_t{device_properties().multiProcessorCount};
    const int64_t wanted = (target + ctas - 1) / ctas;
    const int64_t keys = min_keys_per_split(max_len);
    const int64_t useful = (max_len + keys - 1) / keys;
    p.num_splits = static_cast<int>(std::clamp<int64_t>(std::min(wanted, useful), 1, kMaxSplits));
  }
  p.keys_per_split =
      ((max_len + p.num_splits - 1) / p.num_splits + kBlockN - 1) / kBlockN * kBlockN;
  const int64_t rows = int64_t{p.num_seqs} * p.num_heads;
  const size_t acc_floats =
      p.num_splits > 1 ? static_cast<size_t>(rows) * p.num_splits * kDv : 0;
  const size_t ml_floats = p.num_splits > 1 ? static_cast<size_t>(rows) * p.num_splits * 2 : 0;
  const size_t extra = (extra_bytes + 255) / 256 * 256;
  const size_t total = extra + (acc_floats + ml_floats) * sizeof(float);
  char* base = total > 0 ? static_cast<char*>(workspace.reserve(total)) : nullptr;
  prepare(base);
  if (p.num_splits > 1) {
    p.part_acc = reinterpret_cast<float*>(base + extra);
    p.part_ml = p.part_acc + acc_floats;
  }
  run_decode_mla<1, 4, 2>(p, head_blocks, stream);
  if (p.num_splits > 1) launch_decode_combine(p, stream);
  return true;
}

}  // namespace

bool try_decode_mla(KernelParams& p, const PagedAttentionArgs& args, AttentionWorkspace& workspace,
                    cudaStream_t stream) {
  if (!covers_mla(p)) return false;
  return run_mla(p, args, workspace, 0, [](char*) {}, stream);
}

bool try_prefill_mla(const KernelParams& p, const PagedAttentionArgs& args,
                     AttentionWorkspace& workspace, cudaStream_t stream) {
  if (!covers_mla(p) || p.num_tokens <= 0 || p.query_start == nullptr) return false;
  KernelParams v = p;  // one virtual sequence per prompt token
  v.num_seqs = p.num_tokens;
  v.query_start = nullptr;
  const size_t ints = static_cast<size_t>(p.num_tokens) * 2 * sizeof(int32_t);
  return run_mla(
      v, args, workspace, ints,
      [&](char* base) {
        auto* row_seq = reinterpret_cast<int32_t*>(base);
        v.row_seq = row_seq;
        v.seq_lens = row_seq + p.num_tokens;
        virtual_sequences_kernel<<<(p.num_tokens + 127) / 128, 128, 0, stream>>>(
            p.query_start, p.seq_lens, p.num_seqs, p.num_tokens, row_seq, row_seq + p.num_tokens);
        KITE_CUDA_CHECK_LAUNCH();
      },
      stream);
}

}  // namespace kite::cuda::attention
