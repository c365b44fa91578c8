// Decode-size MoE, two bulk-copy streaming kernels and one that runs both steps (moe_decode.h).
//
// The kernels use the ring of gemm/gemv_bulk.cu: one persistent block per SM, a producer
// warp copying tiles of 8 weight rows x up to 2048 columns into 4 stages (lane r copies row r,
// with the expert ids in shared memory: gate_up 28.9-29.7 us against 29.9-30.3 with one
// thread reading them from global memory, BENCHMARKS.md run 12; 25.8 us once the consumers'
// per-tile index arithmetic and barriers were cut, run 13). Its 16 consumer
// warps take two per tile row (gate_up 35.0 us against 37.6 with one warp per row at
// DeepSeek-V2-Lite batch 1; BENCHMARKS.md run 7). What differs is where a tile's rows come from:
//   gate_up: work group g is 4 features of one matrix, their 4 gate rows and 4 up rows. The
//     shared experts' groups come first (their weights do not depend on the router, so the
//     producer streams them before waiting for the kernel that wrote the ids), then each
//     (token, choice) pair's groups in its expert's matrix.
//   down: work group g is 8 output columns of one token; its items are the shared experts'
//     chunks, then each choice's chunk(s) of its expert's down rows, all summed into the same
//     fp32 accumulators (the routing weight applied per item), so the combine and the shared
//     experts' add need no launch of their own.
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/env_switch.h"
#include "kernels/cuda/fast_divmod.h"
#include "kernels/cuda/gemm/dot_bf16.cuh"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/moe/moe_decode.h"

namespace kite::cuda {
namespace {

constexpr int kRows = 8;          // weight rows per tile
constexpr int kHalf = kRows / 2;  // features per gate_up group
constexpr int kWarps = 16;        // consumer warps: two per tile row, on alternate 16-byte columns
constexpr int kSplit = kWarps / kRows;
constexpr int kChunk = 2048;  // columns per tile row (4 KB)
constexpr int kStages = 4;
constexpr int kTileBytes = kRows * kChunk * 2;
constexpr int kThreads = (kWarps + 1) * 32;
constexpr int kMaxTopK = 64;
constexpr int kMaxPairs = kMoeDecodeMaxTokens * kMaxTopK;
// Tiles, then full and empty barriers, the consumer warps' partial sums (two sets: a group's
// sums land in one while the previous group's are read from the other), the producer's ids.
constexpr int kSmemBytes = kStages * kTileBytes + 2 * kStages * 8 + 2 * kWarps * 4 + kMaxPairs * 4;
static_assert(kSmemBytes % 16 == 0, "the one-launch kernel's act copy follows, 16-byte aligned");
constexpr int kXRegs = kChunk / 8 / (32 * kSplit);  // 16-byte x values per lane and chunk

struct Args {
  const bf16* x;               // [T, d]
  const int32_t* ids;          // [T, top_k]
  const float* weights;        // [T, top_k]
  const bf16* gate_up;         // [E, 2I, d]
  const bf16* down;            // [E, d, I]
  const bf16* shared_gate_up;  // [2Is, d] or null
  const bf16* shared_down;     // [d, Is] or null
  bf16* act;                   // [T, Is] (shared), then [T * top_k, I] (routed): gate_up writes
                               // it, down reads it
  bf16* out;                   // [T, d]
  int tokens, top_k, experts, d, inter, shared_inter;  // shared_inter 0: none
  // The divisors of the per-item index arithmetic (fast_divmod.h: a runtime division costs
  // ~20 instructions, and every consumer warp does it for every tile).
  FastDivmod top_k_div;       // top_k
  FastDivmod per_shared_div;  // gate_up groups per token in the shared experts (>= 1)
  FastDivmod per_pair_div;    // gate_up groups per (token, choice) pair
  FastDivmod col_groups_div;  // down: groups of kRows output columns per token
  FastDivmod per_choice_div;  // down: chunks per routed choice (>= 1)
};

__device__ __forceinline__ uint8_t* tile_row_at(uint8_t* smem, int s, int r) {
  return smem + s * kTileBytes + r * kChunk * 2;
}

__device__ __forceinline__ int div_up(int a, int b) { return (a + b - 1) / b; }

// Both kernels' shared memory after the tiles, its barriers initialised by thread 0 (the caller
// publishes them with __syncthreads).
struct RingState {
  uint64_t* full;
  uint64_t* empty;
  float* partial;  // [2][kWarps]: the consumer warps' sums at a group's end, by group parity
  int* ids;        // the producer's copy of the expert ids (load_ids)
};
__device__ __forceinline__ RingState ring_state(uint8_t* smem) {
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kTileBytes);
  // Every consumer thread arrives to free a slot. One lane per warp after __syncwarp was tried
  // (16 arrivals per slot instead of 512): no faster — gate_up 26.4 us against 25.8,
  // DeepSeek-V2-Lite batch 4 5.48 ms against 5.32 (BENCHMARKS.md run 13).
  if (threadIdx.x == 0) mbar_init_ring(full, full + kStages, kStages, kWarps * 32);
  float* partial = reinterpret_cast<float*>(full + 2 * kStages);
  return {full, full + kStages, partial, reinterpret_cast<int*>(partial + 2 * kWarps)};
}

// The warps' sums for group k (of this block) meet in one set of ring.partial; the set
// alternates, so one barrier per group suffices: group k + 2 writes k's set only after every
// warp passed group k + 1's barrier, i.e. after k's sums were read.
__device__ __forceinline__ float* publish_partial(const RingState& ring, int k, float acc) {
  float* part = ring.partial + (k & 1) * kWarps;
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
  consumers_sync(kWarps * 32);
  return part;
}

// How many of `groups` work groups this block takes: blockIdx.x, + gridDim.x, ...
// (Claiming groups from a device counter instead, so that faster blocks take more, was slower:
// BENCHMARKS.md run 12.)
__device__ __forceinline__ int block_groups(int groups) {
  return static_cast<int>(blockIdx.x) < groups ? div_up(groups - blockIdx.x, gridDim.x) : 0;
}

// An expert id, or 0 for an invalid one (its reads stay in bounds; its token's output is NaN).
__device__ __forceinline__ int expert_of(const Args& a, const int* ids, int pair) {
  const int e = ids[pair];
  return e >= 0 && e < a.experts ? e : 0;
}

// The producer warp waits for the kernel that wrote the ids (pdl_wait) and copies them into
// shared memory, once per launch (`loaded` says whether it has): at the first routed item, or
// earlier, once the ring is full (its next wait for a slot hides the load, which otherwise
// queues behind the block's own tiles while the ring drains).
__device__ __forceinline__ void load_ids(const Args& a, const RingState& ring, bool& loaded) {
  if (loaded) return;
  pdl_wait();
  for (int i = threadIdx.x % 32; i < a.tokens * a.top_k; i += 32) ring.ids[i] = a.ids[i];
  __syncwarp();
  loaded = true;
}

// ---- gate_up + silu_mul ----

struct GateUpGroup {
  const bf16* w;  // the matrix: [2 * half, d]
  const bf16* x;  // its token's row
  bf16* act;      // its output row
  int half, feature0;
};

__device__ __forceinline__ int shared_groups(const Args& a) {
  return a.tokens * div_up(a.shared_inter, kHalf);
}
__device__ __forceinline__ int gate_up_groups(const Args& a) {
  return shared_groups(a) + a.tokens * a.top_k * div_up(a.inter, kHalf);
}

// ids: where the producer looks up the pair's expert; the consumers (null) need no weights.
__device__ __forceinline__ GateUpGroup gate_up_group(const Args& a, int g, const int* ids) {
  const int shared = shared_groups(a);
  int q, f;
  if (g < shared) {
    a.per_shared_div.divmod(g, q, f);  // q: the token
    return {a.shared_gate_up, a.x + static_cast<int64_t>(q) * a.d,
            a.act + static_cast<int64_t>(q) * a.shared_inter, a.shared_inter, f * kHalf};
  }
  a.per_pair_div.divmod(g - shared, q, f);  // q: the pair
  const int64_t e = ids ? expert_of(a, ids, q) : 0;
  return {
      ids ? a.gate_up + e * 2 * a.inter * a.d : nullptr,
      a.x + static_cast<int64_t>(a.top_k_div.div(q)) * a.d,
      a.act + static_cast<int64_t>(a.tokens) * a.shared_inter + static_cast<int64_t>(q) * a.inter,
      a.inter, f * kHalf};
}

// Tile row r of a group: gate row of feature feature0 + r (r < 4), else its up row.
__device__ __forceinline__ bool gate_up_row_valid(const GateUpGroup& grp, int r) {
  return grp.feature0 + r % kHalf < grp.half;
}
__device__ __forceinline__ int64_t gate_up_row(const GateUpGroup& grp, int r) {
  return r < kHalf ? grp.feature0 + r : grp.half + grp.feature0 + (r - kHalf);
}

// Ring items of this block's gate_up: one per group and column chunk.
__device__ __forceinline__ int gate_up_items(const Args& a) {
  return block_groups(gate_up_groups(a)) * div_up(a.d, kChunk);
}

// The producer warp's gate_up copies: this block's items at ring positions first, first + 1...
// Lane r copies tile row r, so a tile's eight copies and their address arithmetic are issued
// side by side rather than one after another by a single thread.
__device__ __forceinline__ void produce_gate_up(const Args& a, const RingState& ring, uint8_t* smem,
                                                int first, uint64_t policy, bool& ids_loaded) {
  const int chunks = div_up(a.d, kChunk), groups = block_groups(gate_up_groups(a));
  const int first_routed = shared_groups(a), r = threadIdx.x % 32;
  int n = 0;  // this phase's items so far
  for (int k = 0; k < groups; ++k) {
    const int g = blockIdx.x + k * gridDim.x;
    if (g >= first_routed) load_ids(a, ring, ids_loaded);
    const GateUpGroup grp = gate_up_group(a, g, ring.ids);
    const bool mine = r < kRows && gate_up_row_valid(grp, r);
    const int rows = __popc(__ballot_sync(0xffffffffu, mine));
    const bf16* src = mine ? grp.w + gate_up_row(grp, r) * a.d : nullptr;
    for (int c = 0; c < chunks; ++c, ++n) {
      const int s = ring_slot_to_fill<kStages>(ring.empty, first + n);
      if (n == kStages) load_ids(a, ring, ids_loaded);
      const int col0 = c * kChunk;
      const uint32_t bytes = static_cast<uint32_t>(min(a.d - col0, kChunk) * 2);
      if (r == 0) mbar_arrive_expect_tx(&ring.full[s], bytes * rows);
      __syncwarp();
      if (mine) bulk_copy_g2s(tile_row_at(smem, s, r), src + col0, bytes, &ring.full[s], policy);
    }
  }
}

// The consumer warps' gate_up: this block's groups' silu(gate) * up into act (global).
__device__ __forceinline__ void consume_gate_up(const Args& a, const RingState& ring, uint8_t* smem,
                                                int first) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunks = div_up(a.d, kChunk), groups = block_groups(gate_up_groups(a));
  const int row = warp % kRows, lane_col = lane + 32 * (warp / kRows);
  // x's values for this lane's columns of the current chunk, kept while the token and chunk
  // stay (every group of a token reads the same x).
  uint4 xv[kXRegs];
  const bf16* x_held = nullptr;
  int n = 0;
  for (int k = 0; k < groups; ++k) {
    const GateUpGroup grp = gate_up_group(a, blockIdx.x + k * gridDim.x, nullptr);
    const bool valid = gate_up_row_valid(grp, row);
    float acc = 0.0f;
    for (int c = 0; c < chunks; ++c, ++n) {
      const int s = ring_slot_filled<kStages>(ring.full, first + n);
      const int col8 = c * (kChunk / 8), cols8 = min(a.d / 8 - col8, kChunk / 8);
      const bf16* xc = grp.x + col8 * 8;
      if (xc != x_held) {
        const uint4* xr = reinterpret_cast<const uint4*>(xc);
#pragma unroll
        for (int j = 0; j < kXRegs; ++j) {
          const int i = lane_col + j * 32 * kSplit;
          // Through L2, never a non-coherent line: the one-launch kernel may read x before its
          // pdl_wait (MoeDecodeStart::kEarly).
          xv[j] = i < cols8 ? __ldcg(xr + i) : make_uint4(0, 0, 0, 0);
        }
        x_held = xc;
      }
      if (valid) {
        const uint4* tile = reinterpret_cast<const uint4*>(tile_row_at(smem, s, row));
#pragma unroll
        for (int j = 0; j < kXRegs; ++j) {
          const int i = lane_col + j * 32 * kSplit;
          if (i < cols8) dot8_bf16(tile[i], xv[j], acc);
        }
      }
      mbar_arrive(&ring.empty[s]);
    }
    const float* part = publish_partial(ring, k, acc);
    // Warp r < 4 writes feature r: its gate rows' two halves and its up rows' two halves.
    if (warp < kHalf && lane == 0 && gate_up_row_valid(grp, warp)) {
      const float gate = part[warp] + part[warp + kRows];
      const float up = part[warp + kHalf] + part[warp + kHalf + kRows];
      // silu(g) = g / (1 + exp(-g)), the form the CPU op and torch evaluate.
      grp.act[grp.feature0 + warp] = __float2bfloat16(gate / (1.0f + expf(-gate)) * up);
    }
  }
}

// ---- down + combine + shared experts ----

struct DownItem {
  const bf16* w;    // row 0 of the item's 8 rows: the matrix [d, width] at column chunk * kChunk
  int64_t act_off;  // the activation row's element in act, at the same column
  int width, cols;  // the matrix's row length; columns of this chunk
  bool routed;
  int choice;
};

// Item i of a token's down group: the shared experts' chunks, then each choice's chunks.
// ids: as for gate_up_group (the consumers need no weights).
__device__ __forceinline__ DownItem down_item(const Args& a, int token, int i, const int* ids) {
  const int shared_chunks = div_up(a.shared_inter, kChunk);
  if (i < shared_chunks) {
    const int col0 = i * kChunk;
    return {a.shared_down + col0,
            static_cast<int64_t>(token) * a.shared_inter + col0,
            a.shared_inter,
            min(a.shared_inter - col0, kChunk),
            false,
            0};
  }
  int choice, chunk;
  a.per_choice_div.divmod(i - shared_chunks, choice, chunk);
  const int col0 = chunk * kChunk, pair = token * a.top_k + choice;
  const int64_t e = ids ? expert_of(a, ids, pair) : 0;
  return {
      ids ? a.down + e * a.d * a.inter + col0 : nullptr,
      static_cast<int64_t>(a.tokens) * a.shared_inter + static_cast<int64_t>(pair) * a.inter + col0,
      a.inter,
      min(a.inter - col0, kChunk),
      true,
      choice};
}

__device__ __forceinline__ int down_groups(const Args& a) {
  return a.tokens * div_up(a.d, kRows);  // kRows output columns of one token each
}
__device__ __forceinline__ int down_per_group(const Args& a) {
  return div_up(a.shared_inter, kChunk) + a.top_k * div_up(a.inter, kChunk);
}

// The producer warp's down copies, at ring positions first, first + 1, ... (lane r: row r).
__device__ __forceinline__ void produce_down(const Args& a, const RingState& ring, uint8_t* smem,
                                             int first, uint64_t policy, bool& ids_loaded) {
  const int groups = block_groups(down_groups(a)), per_group = down_per_group(a);
  const int shared_chunks = div_up(a.shared_inter, kChunk), r = threadIdx.x % 32;
  int n = 0;
  for (int k = 0; k < groups; ++k) {
    int token, col;
    a.col_groups_div.divmod(blockIdx.x + k * gridDim.x, token, col);
    col *= kRows;
    const int rows = min(kRows, a.d - col);
    for (int i = 0; i < per_group; ++i, ++n) {
      const int s = ring_slot_to_fill<kStages>(ring.empty, first + n);
      if (i >= shared_chunks || n == kStages) load_ids(a, ring, ids_loaded);
      const DownItem it = down_item(a, token, i, ring.ids);
      const uint32_t bytes = static_cast<uint32_t>(it.cols * 2);
      if (r == 0) mbar_arrive_expect_tx(&ring.full[s], bytes * rows);
      __syncwarp();
      if (r < rows)
        bulk_copy_g2s(tile_row_at(smem, s, r), it.w + static_cast<int64_t>(col + r) * it.width,
                      bytes, &ring.full[s], policy);
    }
  }
}

// The consumer warps' down + combine. `act` is gate_up's output: a.act itself (read through
// the non-coherent cache: an earlier kernel wrote it) or, ACT_IN_SMEM, this block's copy of it.
template <bool ACT_IN_SMEM>
__device__ __forceinline__ void consume_down(const Args& a, const RingState& ring, uint8_t* smem,
                                             int first, const bf16* act) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int groups = block_groups(down_groups(a)), per_group = down_per_group(a);
  const int row = warp % kRows, lane_col = lane + 32 * (warp / kRows);
  // Whether the token has an invalid expert id (its output is NaN): looked up by the writing
  // lanes when the token changes, which is rarely (a block's groups step through one token's
  // columns).
  int checked_token = -1;
  bool bad = false;
  int n = 0;
  for (int k = 0; k < groups; ++k) {
    int token, col;
    a.col_groups_div.divmod(blockIdx.x + k * gridDim.x, token, col);
    col = col * kRows + row;
    float acc = 0.0f;
    for (int i = 0; i < per_group; ++i, ++n) {
      const int s = ring_slot_filled<kStages>(ring.full, first + n);
      if (col < a.d) {
        const DownItem it = down_item(a, token, i, nullptr);
        const float factor = it.routed ? a.weights[token * a.top_k + it.choice] : 1.0f;
        const uint4* tile = reinterpret_cast<const uint4*>(tile_row_at(smem, s, row));
        const uint4* xr = reinterpret_cast<const uint4*>(act + it.act_off);
        float part = 0.0f;
#pragma unroll 4
        for (int q = lane_col; q < it.cols / 8; q += 32 * kSplit)
          dot8_bf16(tile[q], ACT_IN_SMEM ? xr[q] : __ldg(xr + q), part);
        acc = fmaf(factor, part, acc);
      }
      mbar_arrive(&ring.empty[s]);
    }
    const float* part = publish_partial(ring, k, acc);
    if (warp < kRows && lane == 0 && col < a.d) {
      if (token != checked_token) {
        bad = false;
        for (int j = 0; j < a.top_k; ++j) {
          const int e = a.ids[token * a.top_k + j];
          bad = bad || e < 0 || e >= a.experts;
        }
        checked_token = token;
      }
      a.out[static_cast<int64_t>(token) * a.d + col] =
          __float2bfloat16(bad ? __int_as_float(0x7fffffff) : part[warp] + part[warp + kRows]);
    }
  }
}

// One step per launch: gate_up (DOWN false) or down (DOWN true).
template <bool DOWN>
__global__ void __launch_bounds__(kThreads, 1) moe_step_kernel(const Args a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const RingState ring = ring_state(smem);
  __syncthreads();
  if (threadIdx.x / 32 == kWarps) {
    bool ids_loaded = false;
    if constexpr (DOWN)
      produce_down(a, ring, smem, 0, l2_evict_first_policy(), ids_loaded);
    else
      produce_gate_up(a, ring, smem, 0, l2_evict_first_policy(), ids_loaded);
    return;
  }
  pdl_wait();
  pdl_trigger();
  if constexpr (DOWN)
    consume_down<false>(a, ring, smem, 0, a.act);
  else
    consume_gate_up(a, ring, smem, 0);
}

// ---- both steps in one launch ----
//
// The producer streams this block's gate_up tiles and then its down tiles through one ring
// without a pause: weights never wait for activations, so the down weights are in flight
// while the last gate_up groups (of every block) finish. The consumers run gate_up, meet every
// other block at a grid-wide barrier (down needs all of act), copy act into shared memory and
// run down. The barrier needs every block resident at once: one block per SM, at most as many
// blocks as SMs (moe_decode), and the next launch may start (pdl_trigger) only once all blocks
// of this one run, so no later launch can hold an SM that a block of this one waits for.
//
// sync[0] counts blocks past gate_up, sync[1] blocks done; the last one done zeroes both for
// the next launch on the stream, which touches them only after this launch has ended: after
// its pdl_wait or, starting early, after its x was complete, i.e. after the kernels between
// the two launches waited for this one.

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void grid_barrier(uint32_t* arrived) {
  consumers_sync(kWarps * 32);  // this block's act stores are done
  if (threadIdx.x == 0) {
    __threadfence();  // ... and visible device-wide before the arrival counts
    atomicAdd(arrived, 1u);
    while (load_acquire(arrived) < gridDim.x) __nanosleep(32);
    __threadfence();
  }
  consumers_sync(kWarps * 32);
}

// early (MoeDecodeStart::kEarly, moe_decode.h): the consumers start on gate_up at once and wait
// for the kernel before (the routing) only before down.
__global__ void __launch_bounds__(kThreads, 1)
    moe_one_launch_kernel(const Args a, uint32_t* sync, int act_elems, bool early) {
  extern __shared__ __align__(128) uint8_t smem[];
  const RingState ring = ring_state(smem);
  bf16* act_copy = reinterpret_cast<bf16*>(smem + kSmemBytes);
  __syncthreads();
  if (threadIdx.x / 32 == kWarps) {
    const uint64_t policy = l2_evict_first_policy();
    bool ids_loaded = false;  // the down phase reuses gate_up's copy of the ids
    produce_gate_up(a, ring, smem, 0, policy, ids_loaded);
    produce_down(a, ring, smem, gate_up_items(a), policy, ids_loaded);
    return;
  }
  if (!early) pdl_wait();
  pdl_trigger();
  consume_gate_up(a, ring, smem, 0);
  grid_barrier(&sync[0]);
  if (early) pdl_wait();
  // Other blocks wrote act during this launch: read it through L2 (ld.global.cg), never a
  // possibly stale L1 or non-coherent line.
  const uint4* src = reinterpret_cast<const uint4*>(a.act);
  uint4* dst = reinterpret_cast<uint4*>(act_copy);
  for (int i = threadIdx.x; i < act_elems / 8; i += kWarps * 32) dst[i] = __ldcg(src + i);
  consumers_sync(kWarps * 32);
  consume_down<true>(a, ring, smem, gate_up_items(a), act_copy);
  if (threadIdx.x == 0 && atomicAdd(&sync[1], 1u) == gridDim.x - 1) {
    atomicExch(&sync[0], 0u);
    atomicExch(&sync[1], 0u);
  }
}

// The barrier's counters: a pair per stream that launches the one-launch kernel (launches on
// different streams could otherwise run at once on one pair). Zero at module load; every
// launch leaves its pair zero.
constexpr int kSyncStreams = 64;
__device__ uint32_t g_one_launch_sync[kSyncStreams * 2];

uint32_t* sync_words(cudaStream_t stream) {
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  static uint32_t* base = nullptr;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!base)
    KITE_CUDA_CHECK(cudaGetSymbolAddress(reinterpret_cast<void**>(&base), g_one_launch_sync));
  auto it = std::find(streams.begin(), streams.end(), stream);
  if (it == streams.end()) {
    KITE_CUDA_OP_CHECK(streams.size() < kSyncStreams, "moe_decode",
                       "the one-launch MoE serves at most 64 streams");
    streams.push_back(stream);
    it = streams.end() - 1;
  }
  return base + 2 * (it - streams.begin());
}

struct DeviceLimits {
  int sms = 0;
  int max_smem = 0;  // dynamic shared memory a block may opt in to
};

const DeviceLimits& persistent_blocks_setup() {
  static const DeviceLimits limits = [] {
    DeviceLimits l;
    int device = 0;
    KITE_CUDA_CHECK(cudaGetDevice(&device));
    KITE_CUDA_CHECK(cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, device));
    KITE_CUDA_CHECK(
        cudaDeviceGetAttribute(&l.max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    for (auto kernel : {moe_step_kernel<false>, moe_step_kernel<true>})
      KITE_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    KITE_CUDA_CHECK(cudaFuncSetAttribute(moe_one_launch_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, l.max_smem));
    return l;
  }();
  return limits;
}

// One block per SM: the ring takes most of its shared memory.
int persistent_blocks() { return persistent_blocks_setup().sms; }

// Checks the shapes both launches see and packs them (x / weights / out may be null: the launch
// that does not read them).
Args checked_args(const char* op, const Tensor* x, const Tensor& ids, const Tensor* weights,
                  const MoeDecodeWeights& w, const Tensor& act, Tensor* out) {
  check_device(ids, DType::kI32, op, "ids");
  check_device(w.gate_up, DType::kBF16, op, "gate_up");
  check_device(w.down, DType::kBF16, op, "down");
  check_device(act, DType::kBF16, op, "act");
  KITE_CUDA_OP_CHECK(ids.dim() == 2, op, "ids must be [T, top_k]");
  const int64_t tokens = ids.size(0), top_k = ids.size(1);
  KITE_CUDA_OP_CHECK(tokens <= kMoeDecodeMaxTokens, op,
                     "at most " + std::to_string(kMoeDecodeMaxTokens) + " tokens");
  KITE_CUDA_OP_CHECK(top_k >= 1 && top_k <= kMaxTopK, op, "top_k must be in [1, 64]");
  KITE_CUDA_OP_CHECK(w.gate_up.dim() == 3 && w.gate_up.size(1) % 2 == 0, op,
                     "gate_up must be [E, 2I, d]");
  const int64_t experts = w.gate_up.size(0), inter = w.gate_up.size(1) / 2, d = w.gate_up.size(2);
  KITE_CUDA_OP_CHECK(w.down.dim() == 3 && w.down.size(0) == experts && w.down.size(1) == d &&
                         w.down.size(2) == inter,
                     op, "down must be [E, d, I]");
  const bool has_shared = w.shared_gate_up.defined();
  KITE_CUDA_OP_CHECK(has_shared == w.shared_down.defined(), op,
                     "shared_gate_up and shared_down come together");
  int64_t shared_inter = 0;
  if (has_shared) {
    check_device(w.shared_gate_up, DType::kBF16, op, "shared_gate_up");
    check_device(w.shared_down, DType::kBF16, op, "shared_down");
    shared_inter = w.shared_down.dim() == 2 ? w.shared_down.size(1) : -1;
    KITE_CUDA_OP_CHECK(w.shared_gate_up.dim() == 2 &&
                           w.shared_gate_up.size(0) == 2 * shared_inter &&
                           w.shared_gate_up.size(1) == d && w.shared_down.size(0) == d,
                       op, "shared_gate_up must be [2Is, d] and shared_down [d, Is]");
  }
  KITE_CUDA_OP_CHECK(d % 8 == 0 && inter % 8 == 0 && shared_inter % 8 == 0, op,
                     "d, I and Is must be multiples of 8");
  KITE_CUDA_OP_CHECK(
      all_aligned(16, w.gate_up.raw(), w.down.raw(), act.raw()) &&
          (!has_shared || all_aligned(16, w.shared_gate_up.raw(), w.shared_down.raw())),
      op, "the weights and act must be 16-byte aligned");
  KITE_CUDA_OP_CHECK(act.numel() >= moe_decode_act_elems(tokens, top_k, inter, shared_inter), op,
                     "act is too small");
  KITE_CUDA_OP_CHECK(experts * 2 * inter * d < (int64_t{1} << 40) && d < (1 << 24) &&
                         inter < (1 << 24) && shared_inter < (1 << 24),
                     op, "shapes too large");
  if (x) {
    check_device(*x, DType::kBF16, op, "x");
    KITE_CUDA_OP_CHECK(x->dim() == 2 && x->size(0) == tokens && x->size(1) == d, op,
                       "x must be [T, d], T the rows of ids");
    KITE_CUDA_OP_CHECK(all_aligned(16, x->raw()), op, "x must be 16-byte aligned");
  }
  if (weights) {
    check_device(*weights, DType::kF32, op, "weights");
    KITE_CUDA_OP_CHECK(
        weights->dim() == 2 && weights->size(0) == tokens && weights->size(1) == top_k, op,
        "weights must be [T, top_k]");
  }
  if (out) {
    check_device(*out, DType::kBF16, op, "out");
    KITE_CUDA_OP_CHECK(out->dim() == 2 && out->size(0) == tokens && out->size(1) == d, op,
                       "out must be [T, d]");
  }
  auto divisor = [](int64_t v) {
    return FastDivmod(static_cast<int32_t>(std::max<int64_t>(v, 1)));
  };
  return Args{x ? static_cast<const bf16*>(x->raw()) : nullptr,
              static_cast<const int32_t*>(ids.raw()),
              weights ? static_cast<const float*>(weights->raw()) : nullptr,
              static_cast<const bf16*>(w.gate_up.raw()), static_cast<const bf16*>(w.down.raw()),
              has_shared ? static_cast<const bf16*>(w.shared_gate_up.raw()) : nullptr,
              has_shared ? static_cast<const bf16*>(w.shared_down.raw()) : nullptr,
              // Written by the gate_up launch only; the down launch takes act as const.
              static_cast<bf16*>(const_cast<void*>(act.raw())),
              out ? static_cast<bf16*>(out->raw()) : nullptr, static_cast<int>(tokens),
              static_cast<int>(top_k), static_cast<int>(experts), static_cast<int>(d),
              static_cast<int>(inter), static_cast<int>(shared_inter), divisor(top_k),
              divisor((shared_inter + kHalf - 1) / kHalf), divisor((inter + kHalf - 1) / kHalf),
              divisor((d + kRows - 1) / kRows), divisor((inter + kChunk - 1) / kChunk)};
}

// Work groups of a step: gate_up's groups of 4 features, or down's 8 output columns per token.
template <bool DOWN>
int64_t step_groups(const Args& a) {
  if constexpr (DOWN) return int64_t{a.tokens} * ((a.d + kRows - 1) / kRows);
  return int64_t{a.tokens} * ((a.shared_inter + kHalf - 1) / kHalf +
                              int64_t{a.top_k} * ((a.inter + kHalf - 1) / kHalf));
}

// One step in its own launch, on checked arguments.
template <bool DOWN>
void launch_step(const Args& a, cudaStream_t stream) {
  const int64_t groups = step_groups<DOWN>(a);
  if (groups == 0 || a.d == 0) return;
  launch_pdl(moe_step_kernel<DOWN>,
             dim3(static_cast<unsigned>(std::min<int64_t>(groups, persistent_blocks()))), kThreads,
             kSmemBytes, stream, a);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool moe_decode_applies(const Tensor& x, const MoeDecodeWeights& w) {
  auto bf16 = [](const Tensor& t) { return t.dtype() == DType::kBF16; };
  const bool shared = w.shared_gate_up.defined();
  return x.dim() == 2 && x.size(0) <= kMoeDecodeMaxTokens && x.size(1) % 8 == 0 && bf16(x) &&
         bf16(w.gate_up) && bf16(w.down) && w.down.dim() == 3 && w.down.size(2) % 8 == 0 &&
         (!shared || (bf16(w.shared_gate_up) && bf16(w.shared_down) && w.shared_down.dim() == 2 &&
                      w.shared_down.size(1) % 8 == 0));
}

void moe_decode_gate_up(const Tensor& x, const Tensor& ids, const MoeDecodeWeights& w, Tensor& act,
                        cudaStream_t stream) {
  launch_step<false>(checked_args("moe_decode_gate_up", &x, ids, nullptr, w, act, nullptr), stream);
}

void moe_decode_down(const Tensor& ids, const Tensor& weights, const MoeDecodeWeights& w,
                     const Tensor& act, Tensor& out, cudaStream_t stream) {
  launch_step<true>(checked_args("moe_decode_down", nullptr, ids, &weights, w, act, &out), stream);
}

bool moe_decode_one_launch_fits(int64_t tokens, int64_t top_k, int64_t inter,
                                int64_t shared_inter) {
  const int64_t act_bytes = 2 * moe_decode_act_elems(tokens, top_k, inter, shared_inter);
  return kSmemBytes + act_bytes <= persistent_blocks_setup().max_smem;
}

void moe_decode(const Tensor& x, const Tensor& ids, const Tensor& weights,
                const MoeDecodeWeights& w, Tensor& act, Tensor& out, cudaStream_t stream,
                MoeDecodeLaunches launches, MoeDecodeStart start) {
  // KITE_CUDA_MOE_ONE_LAUNCH=0: two launches wherever kAuto would take one (A/B runs).
  static const bool one_off = env_switched_off("KITE_CUDA_MOE_ONE_LAUNCH");
  const Args a = checked_args("moe_decode", &x, ids, &weights, w, act, &out);
  const int64_t act_elems = moe_decode_act_elems(a.tokens, a.top_k, a.inter, a.shared_inter);
  const bool fits = moe_decode_one_launch_fits(a.tokens, a.top_k, a.inter, a.shared_inter);
  KITE_CUDA_OP_CHECK(fits || launches != MoeDecodeLaunches::kOne, "moe_decode",
                     "one launch needs act (" + std::to_string(2 * act_elems) +
                         " bytes) to fit in shared memory beside the ring");
  if (launches == MoeDecodeLaunches::kTwo || !fits ||
      (launches == MoeDecodeLaunches::kAuto && one_off)) {
    launch_step<false>(a, stream);
    launch_step<true>(a, stream);
    return;
  }
  // At most one block per SM, so that every block is resident at the grid barrier.
  const int64_t blocks =
      std::min<int64_t>(std::max(step_groups<false>(a), step_groups<true>(a)), persistent_blocks());
  if (blocks == 0 || a.d == 0) return;
  launch_pdl(moe_one_launch_kernel, dim3(static_cast<unsigned>(blocks)), kThreads,
             static_cast<size_t>(kSmemBytes + 2 * act_elems), stream, a, sync_words(stream),
             static_cast<int>(act_elems), start == MoeDecodeStart::kEarly);
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace kite::cuda
