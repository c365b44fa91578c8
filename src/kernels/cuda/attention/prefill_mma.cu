// Tensor-core causal prefill attention for BF16 (FlashAttention-2 style, mma.sync m16n8k16).
//
// Block (query tile, head, sequence): four warps, 64 query rows (16 per warp), keys in tiles
// of 64 staged in shared memory by cp.async, two stages deep (tile j + 1 loads while tile j is
// used). Each warp keeps its rows' Q fragments and output accumulators in registers and an
// online softmax in log2 units; the score fragments become the A operand of P·V directly.
// Keys past the sequence are zero-filled and masked; the causal mask runs only on the tiles
// that cross a row's limit. Query tiles are taken longest-first (reverse order), so the
// heaviest blocks start in the first wave.
//
// Same semantics as prefill.cu (the CUDA-core kernel, kept for F32 and other head dims): rows
// of a sequence with more queries than keys, or with a block id outside the cache, are NaN.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention/attention_launch.h"
#include "kernels/cuda/attention/mma_tile.cuh"
#include "kernels/cuda/cuda_check.h"

namespace kite::cuda::attention {
namespace {

using namespace mma;

constexpr int kThreads = 128;
constexpr int kBlockM = 64;  // query rows per block, 16 per warp
constexpr int kBlockN = 64;  // keys per tile

template <int DQK, int DV>
struct PrefillLayout {
  static constexpr int kQBytes = kBlockM * DQK * 2;
  static constexpr int kKBytes = kBlockN * DQK * 2;
  static constexpr int kVBytes = kBlockN * DV * 2;
  static constexpr int kStageBytes = kKBytes + kVBytes;
  static constexpr int kSmemBytes = kQBytes + 2 * kStageBytes;
};

// Writes NaN to this block's rows (a sequence whose result is undefined).
template <int DV>
__device__ void write_nan_rows(const KernelParams& p, int64_t token0, int rows, int head) {
  bf16* out = static_cast<bf16*>(p.out);
  const bf16 nan = __float2bfloat16_rn(__int_as_float(0x7fffffff));
  for (int i = threadIdx.x; i < rows * DV; i += kThreads) {
    const int64_t token = token0 + i / DV;
    if (token >= 0 && token < p.num_tokens) out[(token * p.num_heads + head) * DV + i % DV] = nan;
  }
}

// KVF8: FP8 caches (p.kv_fp8), a separate instantiation as in decode_mma.cu.
template <int DQK, int DV, bool KVF8>
__device__ void prefill_tile(const KernelParams& p, char* smem, int head, int seq, int tile) {
  using L = PrefillLayout<DQK, DV>;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int64_t q_begin = p.query_start[seq];
  const int64_t q_len = p.query_start[seq + 1] - q_begin;
  const int64_t seq_len = p.seq_lens[seq];
  const int m0 = tile * kBlockM;
  const int rows = static_cast<int>(std::min<int64_t>(kBlockM, q_len - m0));
  if (seq_len < 0 || q_len > seq_len || seq_len > int64_t{p.max_blocks_per_seq} * p.block_size) {
    write_nan_rows<DV>(p, q_begin + m0, rows, head);
    return;
  }
  const int64_t key_offset = seq_len - q_len;  // row i sees keys [0, key_offset + i]
  const int64_t n_end = std::min<int64_t>(seq_len, key_offset + m0 + rows);
  const int n_tiles = static_cast<int>((n_end + kBlockN - 1) / kBlockN);
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
  char* sq = smem;
  // Stage i (of 2) starts at smem + kQBytes + i * kStageBytes (computed, not an array: a
  // run-time index into a local array would put it on the stack).
  char* const stages = smem + L::kQBytes;

  // Q rows (zeros past the sequence's queries), then K/V tile 0: one copy group.
  const bf16* q = static_cast<const bf16*>(p.q);
  for (int idx = tid; idx < kBlockM * (DQK / 8); idx += kThreads) {
    const int row = idx / (DQK / 8), chunk = idx % (DQK / 8);
    const int64_t token = q_begin + m0 + row;
    const bool valid = row < rows && token >= 0 && token < p.num_tokens;
    const bf16* src = valid ? q + (token * p.num_heads + head) * DQK + chunk * 8 : q;
    cp_async16(sq + swz<DQK>(row, chunk), src, valid);
  }
  const PagedKv kv{p.k_cache,
                   p.v_cache,
                   table,
                   p.block_size,
                   p.num_blocks,
                   p.k_slot_stride,
                   p.v_slot_stride,
                   kv_head * p.k_head_stride,
                   kv_head * p.v_head_stride,
                   // The BF16 instantiation keeps the run-time flag (false there): a constant
                   // made ptxas spill in the 128-dim kernel.
                   KVF8 || p.kv_fp8,
                   p.k_scale,
                   p.v_scale};
  auto load_stage = [&](int j, char* dst) {
    return load_kv_tiles<DQK, DV, kBlockN, kThreads>(dst, dst + L::kKBytes, kv, j * kBlockN,
                                                     static_cast<int>(n_end), tid);
  };
  bool ok = load_stage(0, stages);
  cp_async_commit();

  uint32_t qf[DQK / 16][4];
  float o[DV / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int warp_row0 = m0 + warp * 16;  // first row (within the sequence) of this warp
  const uint32_t sq_addr = smem_addr(sq);

  // FP8: tile j + 1's codes are loaded into registers before tile j is used and converted into
  // its stage after (mma_tile.cuh, Fp8KvFetch).
  Fp8KvFetch<DQK, DV, kBlockN, kThreads> f8;
  for (int j = 0; j < n_tiles; ++j) {
    if (j + 1 < n_tiles) {
      if constexpr (KVF8) {
        ok &= f8.fetch(kv, (j + 1) * kBlockN, static_cast<int>(n_end), tid);
        cp_async_wait<0>();  // the Q rows' copies (tile 0's codes were stored synchronously)
      } else {
        ok &= load_stage(j + 1, stages + ((j + 1) & 1) * L::kStageBytes);
        cp_async_commit();
        cp_async_wait<1>();
      }
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < DQK / 16; ++kk)
        ldmatrix_x4(qf[kk], a_addr<DQK>(sq_addr, warp * 16, kk * 16, lane));
    }
    const uint32_t sk = smem_addr(stages + (j & 1) * L::kStageBytes);
    const uint32_t sv = sk + L::kKBytes;

    float s[kBlockN / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < DQK / 16; kk += 2) {
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        uint32_t b[4];
        ldmatrix_x4(b, kb_addr<DQK>(sk, nt * 8, kk * 16, lane));
        mma_bf16(s[nt], qf[kk], b[0], b[1]);
        mma_bf16(s[nt], qf[kk + 1], b[2], b[3]);
      }
    }
    const int64_t n0 = int64_t{j} * kBlockN;
    const bool need_mask = n0 + kBlockN - 1 > key_offset + warp_row0;
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = n0 + nt * 8 + 2 * t + (e & 1);
        const int64_t row = warp_row0 + g + (e >= 2 ? 8 : 0);
        s[nt][e] *= p.scale_log2;
        if (need_mask && key > key_offset + row) s[nt][e] = -INFINITY;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
        mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = quad_max(mx);
      const float m_new = fmaxf(m[r], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float corr = exp2f(m[r] - m_use);  // 0 while m[r] is -inf
      m[r] = m_new;
      l[r] *= corr;
#pragma unroll
      for (int dt = 0; dt < DV / 8; ++dt) {
        o[dt][2 * r] *= corr;
        o[dt][2 * r + 1] *= corr;
      }
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - m_use);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - m_use);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      l[r] += sum;
    }
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                             pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dt = 0; dt < DV / 8; dt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vb_addr<DV>(sv, kk * 16, dt * 8, lane));
        mma_bf16(o[dt], a, b[0], b[1]);
        mma_bf16(o[dt + 1], a, b[2], b[3]);
      }
    }
    if constexpr (KVF8) {
      if (j + 1 < n_tiles) {  // the stage tile j - 1 used: every thread is past this iteration's barrier
        char* dst = stages + ((j + 1) & 1) * L::kStageBytes;
        f8.store(dst, dst + L::kKBytes, kv, tid);
      }
    }
    __syncthreads();  // the next iteration refills this stage
  }

  const bool any_bad = __syncthreads_or(!ok);
  bf16* out = static_cast<bf16*>(p.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * 16 + g + 8 * r;  // within the block
    const float total = quad_sum(l[r]);
    const float inv = (!any_bad && total > 0.0f) ? 1.0f / total : __int_as_float(0x7fffffff);
    const int64_t token = q_begin + m0 + row;
    if (row >= rows || token < 0 || token >= p.num_tokens) continue;
    bf16* dst = out + (token * p.num_heads + head) * DV + 2 * t;
#pragma unroll
    for (int dt = 0; dt < DV / 8; ++dt)
      *reinterpret_cast<uint32_t*>(dst + dt * 8) =
          pack_bf16(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
  }
}

template <int DQK, int DV, bool KVF8>
__global__ void __launch_bounds__(kThreads, 2) prefill_mma_kernel(const KernelParams p) {
  extern __shared__ __align__(128) char smem[];
  const int head = blockIdx.y, seq = blockIdx.z;
  const int64_t q_len = p.query_start[seq + 1] - p.query_start[seq];
  if (q_len <= 0) return;
  const int num_tiles = static_cast<int>((q_len + kBlockM - 1) / kBlockM);
  for (int i = blockIdx.x; i < num_tiles; i += gridDim.x)
    prefill_tile<DQK, DV, KVF8>(p, smem, head, seq, num_tiles - 1 - i);
}

template <int DQK, int DV, bool KVF8>
void run_prefill_mma_as(const KernelParams& p, int64_t max_query_len, cudaStream_t stream) {
  constexpr int kSmem = PrefillLayout<DQK, DV>::kSmemBytes;
  static const bool configured = [] {
    KITE_CUDA_CHECK(cudaFuncSetAttribute(prefill_mma_kernel<DQK, DV, KVF8>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)configured;
  const int64_t tiles = (std::max<int64_t>(max_query_len, 1) + kBlockM - 1) / kBlockM;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles, INT32_MAX)), p.num_heads,
                  p.num_seqs);
  prefill_mma_kernel<DQK, DV, KVF8><<<grid, kThreads, kSmem, stream>>>(p);
  KITE_CUDA_CHECK_LAUNCH();
}

template <int DQK, int DV>
void run_prefill_mma(const KernelParams& p, int64_t max_query_len, cudaStream_t stream) {
  if (p.kv_fp8)
    run_prefill_mma_as<DQK, DV, true>(p, max_query_len, stream);
  else
    run_prefill_mma_as<DQK, DV, false>(p, max_query_len, stream);
}

}  // namespace

bool try_prefill_mma(const KernelParams& p, int64_t max_query_len, cudaStream_t stream) {
  if (!p.bf16 || p.num_heads > 65535 || p.kv_bf16_tail != 0) return false;
  if (p.head_dim_qk == 128 && p.head_dim_v == 128) {
    run_prefill_mma<128, 128>(p, max_query_len, stream);
  } else if (p.head_dim_qk == 64 && p.head_dim_v == 64) {
    run_prefill_mma<64, 64>(p, max_query_len, stream);
  } else if (p.head_dim_qk == 192 && p.head_dim_v == 128) {
    run_prefill_mma<192, 128>(p, max_query_len, stream);
  } else {
    return false;
  }
  return true;
}

}  // namespace kite::cuda::attention
