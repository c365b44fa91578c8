// The W4A16 GEMM for batches past decode sizes (9 <= M <= 128) on Hopper's warpgroup MMA
// (wgmma, sm_90a): each warpgroup (4 warps) multiplies 64 weight rows by the block's 16, 32 or 64
// tokens. Its A operand, the weight, comes from registers: each warp dequantizes its 16-row
// tile's 512-byte code chunk with w4_frag exactly as the other W4 kernels do (an mma.m16n8k16 A
// fragment is also a wgmma A fragment of a warp's 16 rows). Its B operand, the activations, is
// read by the tensor cores straight from shared memory (one 128-byte row per token and 64-channel
// chunk, 128-byte swizzled), so the warps do not load x fragments themselves: the mma.sync GEMM
// it replaces (run 20) read ~256 bytes of x from shared memory per warp MMA, which set its speed.
//
// Work: a block is WG warpgroups (64 x WG weight rows) by NT tokens (tokens blockIdx.x * NT ..,
// x fastest so the token blocks of one row block run side by side and share its codes through
// L2). Stages of SCH chunks go through a cp.async ring of STAGES: x [NT tokens, SCH chunks], the
// block's codes, and the chunks' group scales and zeros of its rows. A chunk is four k16 wgmmas
// into a fresh fp32 tile that is then scaled by the rows' group scale into the accumulators (the
// other W4 kernels' numerics). x arrives in the codes' k order (launch_w4_prep's mma_order: see
// x_desc). Where it is taken: w4_wgmma_wins (BENCHMARKS.md, run 21).
//
// Split K (blockIdx.z): weights too narrow to give every SM a block (down, o and q/k/v below 65
// rows: 32-48 row blocks against 132 SMs) split the chunks into plan.splits ranges. Each block
// writes its fp32 partial tile to the workspace and counts itself in on its output tile's
// counter (zeroed by the prep kernel that runs before); the last one in adds the partials in
// split order (the same sum whichever block is last) and runs the epilogue.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant/quant_geometry.h"
#include "kernels/cuda/quant/quant_kernel.cuh"
#include "kernels/cuda/quant/quant_linear.h"
#include "kernels/cuda/stream.h"

namespace kite::cuda::quant_detail {
namespace {

// ---------------------------------------------------------------------------------------------
// wgmma with A in registers (PTX ISA 9.7.15): D[64 x N] (+)= A[64 x 16] * B[16 x N], B K-major
// in shared memory behind a matrix descriptor; D's registers hold, per warp w of the warpgroup,
// rows 16w + g and 16w + g + 8 of every 8-column block (an mma.m16n8 C fragment per block).

template <int N>
struct WgmmaRs;

template <>
struct WgmmaRs<16> {
  __device__ __forceinline__ static void run(float (&d)[8], const uint32_t (&a)[4], uint64_t desc,
                                             int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %12, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %13, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc));
  }
};

template <>
struct WgmmaRs<32> {
  __device__ __forceinline__ static void run(float (&d)[16], const uint32_t (&a)[4], uint64_t desc,
                                             int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %20, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %21, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc));
  }
};

template <>
struct WgmmaRs<64> {
  __device__ __forceinline__ static void run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc,
                                             int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %37, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc));
  }
};

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving reads of a wgmma's accumulators above the wait that ends it.
template <int R>
__device__ __forceinline__ void fence_registers(float (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
// cp.async's writes (generic proxy) made visible to the tensor cores' reads (async proxy).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The descriptor of a K-major, 128-byte-swizzled B tile at shared address addr: rows of 128
// bytes (one token's 64 channels), 8-row atoms 1,024 bytes apart (the stride byte offset), the
// leading byte offset unused for this layout. A k16 step within the chunk starts 32 bytes on;
// the hardware applies the swizzle to the address it forms, so the chunk must sit 1,024-aligned.
// The W4 codes are not in channel order along k: a lane's 32-bit code word h of its 16-byte
// chunk piece (w4_frag) holds, for mma k positions 2t, 2t + 1 (t = lane % 4) of k16 step h,
// channels 16t + 4h + {0, 1}, and for positions 2t + 8, 2t + 9 channels 16t + 4h + {2, 3} (the
// layout that lets the decode kernels load a lane's x as one contiguous run). The wgmma reads B
// in k order, so x comes in the codes' order instead (launch_w4_prep with mma_order).
__device__ __forceinline__ uint64_t x_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

template <int NT, int WG, int SCH, int STAGES>
struct Layout {
  static constexpr int kRows = WG * 64;
  static constexpr int kTiles = WG * 4;  // 16-row tiles = warps
  static constexpr int kThreads = WG * 128;
  static constexpr int kXChunkBytes = NT * 128;  // a multiple of 1,024 for NT >= 8
  static constexpr int kXBytes = SCH * kXChunkBytes;
  static constexpr int kCodeBytes = kTiles * SCH * 512;
  static constexpr int kScaleBytes = SCH * kRows * 4;
  static constexpr int kZeroBytes = SCH * kRows;
  static constexpr int kStageBytes =
      (kXBytes + kCodeBytes + kScaleBytes + kZeroBytes + 1023) / 1024 * 1024;
  static constexpr int kSmemBytes = STAGES * kStageBytes + 1024;  // + slack to align the base
};

// Token blocks of nt (x, fastest) by row blocks of wg warpgroups (y) for M rows.
dim3 grid_for(int64_t m, int64_t n_pad, int nt, int wg) {
  return dim3(static_cast<unsigned>(ceil_div(m, nt)),
              static_cast<unsigned>(ceil_div(n_pad, wg * 64)));
}

// Split K's workspace: partial sums [splits, m, n_pad] F32 and one counter per output tile.
struct SplitK {
  float* partial;
  int* counters;
  int chunks;  // per split
};

template <int NT, int WG, int SCH, int STAGES, typename TOut>
__global__ void __launch_bounds__(WG * 128, WG == 2 ? 2 : 3)
    w4_wgmma_kernel(const KParams p, const SplitK sk) {
  using L = Layout<NT, WG, SCH, STAGES>;
  constexpr int kAcc = NT / 2;  // fp32 accumulators per thread
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2;
  const int tok0 = blockIdx.x * NT;
  const int tile0 = blockIdx.y * L::kTiles;  // the block's first 16-row tile
  const int tiles = p.n_pad / 16;
  // This block's chunks: [c0, c0 + nloc) of K.
  const int c0 = blockIdx.z * sk.chunks, nloc = min(sk.chunks, p.nchunks - c0);
  const int stages = (nloc + SCH - 1) / SCH;

  auto stage_ptr = [&](int slot) { return smem + slot * L::kStageBytes; };
  // This thread's copies of every stage, the same but for the chunk: where from at the stage's
  // first chunk, where to in the slot, and the stage chunk index below which the copy is real
  // (0 past M or past the rows: zero-filled). Computed once: the address arithmetic of a
  // per-stage loop was most of the kernel's instructions (BENCHMARKS.md, run 21).
  constexpr int kXCopies = NT * SCH * 8 / L::kThreads;  // 16-byte pieces of x
  constexpr int kCCopies = L::kTiles * SCH * 32 / L::kThreads;  // of codes
  static_assert(kXCopies >= 1 && kCCopies >= 1, "every thread copies x and codes");
  const bf16* x = static_cast<const bf16*>(p.x);
  const bf16* xsrc[kXCopies];
  int xdst[kXCopies], xlim[kXCopies];
#pragma unroll
  for (int j = 0; j < kXCopies; ++j) {
    const int i = tid + j * L::kThreads;
    const int tk = i / (SCH * 8), s = (i / 8) % SCH, u = i % 8, tok = tok0 + tk;
    xsrc[j] = x + static_cast<int64_t>(min(tok, p.m - 1)) * p.ldx + (c0 + s) * kChunk + u * 8;
    // x in the codes' k order (launch_w4_prep's mma_order, see x_desc), 128-byte swizzled.
    xdst[j] = s * L::kXChunkBytes + tk * 128 + ((u ^ (tk & 7)) << 4);
    xlim[j] = tok < p.m ? nloc - s : 0;
  }
  const uint8_t* csrc[kCCopies];
  int cdst[kCCopies], clim[kCCopies];
#pragma unroll
  for (int j = 0; j < kCCopies; ++j) {
    const int i = tid + j * L::kThreads;
    const int tl = i / (SCH * 32), s = (i / 32) % SCH, q = i % 32, tile = tile0 + tl;
    csrc[j] =
        p.codes + (static_cast<int64_t>(min(tile, tiles - 1)) * p.nchunks + c0 + s) * 512 + q * 16;
    cdst[j] = L::kXBytes + (tl * SCH + s) * 512 + q * 16;
    clim[j] = tile < tiles ? nloc - s : 0;
  }
  auto load_stage = [&](int st) {
    uint8_t* base = stage_ptr(st % STAGES);
    const int cs = st * SCH;
#pragma unroll
    for (int j = 0; j < kXCopies; ++j) {
      const bool ok = cs < xlim[j];
      cp_async16(base + xdst[j], ok ? xsrc[j] + cs * kChunk : x, ok);
    }
#pragma unroll
    for (int j = 0; j < kCCopies; ++j) {
      const bool ok = cs < clim[j];
      cp_async16(base + cdst[j], ok ? csrc[j] + cs * 512 : p.codes, ok);
    }
    // Group scales (4 rows a copy) and zeros (16 rows a copy) of the block's rows, per chunk:
    // fewer pieces than threads.
    uint8_t* sbase = base + L::kXBytes + L::kCodeBytes;
    uint8_t* zbase = sbase + L::kScaleBytes;
    constexpr int kPieces = L::kRows / 4 + L::kRows / 16;
    static_assert(SCH * kPieces <= L::kThreads, "one scale or zero piece a thread");
    if (tid < SCH * kPieces) {
      const int s = tid / kPieces, r = tid % kPieces;
      const int c = cs + s;
      const bool scale = r < L::kRows / 4;
      const int row = tile0 * 16 + (scale ? r * 4 : (r - L::kRows / 4) * 16);
      const bool ok = c < nloc && row < p.n_pad;
      const int64_t o = ok ? static_cast<int64_t>(group_of_chunk(p, c0 + c)) * p.n_pad + row : 0;
      if (scale)
        cp_async16(sbase + (s * L::kRows + r * 4) * 4, p.wscale + o, ok);
      else
        cp_async16(zbase + s * L::kRows + (r - L::kRows / 4) * 16, p.zeros + o, ok);
    }
  };

  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  // A chunk's unscaled products, ended before the next chunk's dequantization (two chunks in
  // flight, a second tile of these, measured slower: one block per SM instead of two, run 21).
  float ct[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) ct[i] = 0.0f;

#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < stages) load_stage(st);
    cp_async_commit();
  }
  const int rl = warp * 16 + g;  // this lane's rows rl and rl + 8 within the block
  for (int st = 0; st < stages; ++st) {
    cp_async_wait<STAGES - 2>();
    fence_proxy_async();
    __syncthreads();  // stage st landed for every thread; the slot refilled below is free
    if (st + STAGES - 1 < stages) load_stage(st + STAGES - 1);
    cp_async_commit();
    const uint8_t* base = stage_ptr(st % STAGES);
    const uint8_t* cbase = base + L::kXBytes;
    const float* sc = reinterpret_cast<const float*>(cbase + L::kCodeBytes);
    const uint8_t* zs = cbase + L::kCodeBytes + L::kScaleBytes;
    // Every stage runs all SCH chunks (no branch around a wgmma: a divergent path makes ptxas
    // serialize them); chunks past K were staged as zero x and zero scales, so they add 0.
#pragma unroll
    for (int s = 0; s < SCH; ++s) {
      const uint4 wv = reinterpret_cast<const uint4*>(cbase + (warp * SCH + s) * 512)[lane];
      const float s0 = sc[s * L::kRows + rl], s1 = sc[s * L::kRows + rl + 8];  // group scales
      const uint32_t z0 = w4_zero2(zs[s * L::kRows + rl]);
      const uint32_t z1 = w4_zero2(zs[s * L::kRows + rl + 8]);
      uint32_t a[4][4];
#pragma unroll
      for (int h = 0; h < 4; ++h) w4_frag(word(wv, h), z0, z1, a[h]);
      const uint32_t xa = smem_addr(base + s * L::kXChunkBytes);
      wgmma_fence();
#pragma unroll
      for (int h = 0; h < 4; ++h) WgmmaRs<NT>::run(ct, a[h], x_desc(xa + h * 32), h);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(ct);
      // acc += the products times the group scale of rows g (registers i % 4 < 2) and g + 8.
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = fmaf(ct[i], (i & 2) ? s1 : s0, acc[i]);
    }
  }
  cp_async_wait<0>();  // no copy may still land in shared memory as the block exits

  const int t = lane & 3;
  auto row_of = [&](int i) { return (tile0 + warp) * 16 + g + ((i & 2) ? 8 : 0); };
  auto tok_of = [&](int i) { return tok0 + (i / 4) * 8 + 2 * t + (i & 1); };
  if (gridDim.z > 1) {
    const int64_t plane = static_cast<int64_t>(p.m) * p.n_pad;
#pragma unroll
    for (int i = 0; i < kAcc; ++i)
      if (row_of(i) < p.n && tok_of(i) < p.m)
        __stcg(
            sk.partial + blockIdx.z * plane + static_cast<int64_t>(tok_of(i)) * p.n_pad + row_of(i),
            acc[i]);
    __threadfence();  // the partials visible device-wide before the count says so
    __shared__ int last;
    __syncthreads();
    int* counter = sk.counters + blockIdx.y * gridDim.x + blockIdx.x;
    if (tid == 0) last = atomicAdd(counter, 1) == static_cast<int>(gridDim.z) - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (tid == 0) *counter = 0;  // ready for the next launch (the prep kernel zeroes it too)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      if (row_of(i) >= p.n || tok_of(i) >= p.m) continue;
      const float* src = sk.partial + static_cast<int64_t>(tok_of(i)) * p.n_pad + row_of(i);
      float v = 0.0f;
      for (int z = 0; z < static_cast<int>(gridDim.z); ++z) v += __ldcg(src + z * plane);
      acc[i] = v;
    }
  }
#pragma unroll
  for (int i = 0; i < kAcc; ++i)
    if (row_of(i) < p.n && tok_of(i) < p.m)
      finish_output<kW4, TOut>(p, tok_of(i), row_of(i), acc[i]);
}

template <int NT, int WG, typename TOut>
void launch(const KParams& p, const W4WgmmaPlan& plan, const SplitK& sk, cudaStream_t stream) {
  constexpr int kSch = 2, kStages = 4;
  using L = Layout<NT, WG, kSch, kStages>;
  auto kernel = w4_wgmma_kernel<NT, WG, kSch, kStages, TOut>;
  static const bool ready = [&] {
    KITE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kSmemBytes));
    return true;
  }();
  (void)ready;
  dim3 grid = grid_for(p.m, p.n_pad, NT, WG);
  grid.z = static_cast<unsigned>(plan.splits);
  kernel<<<grid, L::kThreads, L::kSmemBytes, stream>>>(p, sk);
  KITE_CUDA_CHECK_LAUNCH();
}

// A forced block shape for measurements: tokens, warpgroups, K splits (0 chooses).
int g_nt = 0, g_wg = 0, g_splits = 0;

int64_t blocks_of(int64_t m, int64_t n_pad, int nt, int wg) {
  const dim3 grid = grid_for(m, n_pad, nt, wg);
  return static_cast<int64_t>(grid.x) * grid.y;
}
int64_t sm_count() { return device_properties().multiProcessorCount; }

// Chunks per split: a whole number of 2-chunk stages, at least kMinSplitChunks unless forced
// (at M = 128, 2 splits of Llama-3-8B's down, 224 chunks, measured 79.7 us against 86.3 whole;
// of o and q/k/v, 64 chunks, 34.4 against 28.7 and 41.7 against 37.0: BENCHMARKS.md run 22; at
// M = 64, down in 4 splits of 56 with two warpgroups 48.1 us against 57.5 in the old plan's 2
// splits of one warpgroup and 56.5 for the tensor-core kernel: run 23).
constexpr int kMinSplitChunks = 56;
// Weights long enough for at least two splits: from 33 rows the wgmma GEMM with split K beats
// the tensor-core kernel on them, in blocks of two warpgroups (run 23).
bool splits_well(int64_t nchunks) { return nchunks >= 2 * kMinSplitChunks; }
int chunks_per_split(int64_t nchunks, int splits) {
  return static_cast<int>(round_up(ceil_div(nchunks, static_cast<int64_t>(splits)), 2));
}

}  // namespace

// Where it beat the tensor-core kernel on the H200 (BENCHMARKS.md, run 21): on weights whose
// 128-row blocks of 64 tokens fill the SMs (Llama-3-8B's stacked gate_up: from 9 rows on), and
// on narrower ones from 33 rows on weights wider than 4,096 rows (q/k/v 6,144) or long enough to
// split K well (down, 14,336 channels: run 23) and from 65 rows on every weight; the
// tensor-core kernel, which splits K over its warps, keeps the rest.
bool w4_wgmma_fills_sms(int64_t n_pad) { return blocks_of(64, n_pad, 64, 2) >= sm_count(); }

bool w4_wgmma_wins(int64_t m, int64_t n_pad, int64_t nchunks) {
  if (w4_wgmma_fills_sms(n_pad)) return true;
  return m > 64 || (m > 32 && (n_pad > 4096 || splits_well(nchunks)));
}

// Tokens per block: the widest wgmma M needs (16, 32, 64), but 32 at most unless 64-token
// blocks of two warpgroups fill the SMs (narrow weights want more, smaller blocks); two
// warpgroups sharing the block's x where that leaves at least a block for every other SM, or
// where K is long enough to split into the SMs the fewer blocks leave.
// Split K where the blocks still leave SMs idle: as many splits as bring the blocks to two per
// SM (the residency of the two-warpgroup shape), each of at least kMinSplitChunks chunks.
W4WgmmaPlan w4_wgmma_plan(int64_t m, int64_t n_pad, int64_t nchunks) {
  int nt = m <= 16 ? 16 : m <= 32 ? 32 : 64;
  if (nt == 64 && blocks_of(m, n_pad, 64, 2) < sm_count()) nt = 32;
  int wg = blocks_of(m, n_pad, nt, 2) * 2 >= sm_count() || splits_well(nchunks) ? 2 : 1;
  if (g_nt) nt = g_nt;
  if (g_wg) wg = g_wg;
  const int64_t tiles = blocks_of(m, n_pad, nt, wg);
  int splits = static_cast<int>(
      std::clamp<int64_t>(std::min(2 * sm_count() / tiles, nchunks / kMinSplitChunks), 1, 64));
  if (g_splits) splits = static_cast<int>(std::min<int64_t>(g_splits, nchunks));
  const int cps = chunks_per_split(nchunks, splits);
  splits = static_cast<int>(ceil_div(nchunks, static_cast<int64_t>(cps)));  // none left empty
  return {nt, wg, splits, cps, tiles};
}

namespace {
// Split K's scratch: the tile counters, then (256-byte aligned) the partials.
size_t counter_bytes(const W4WgmmaPlan& plan) {
  return static_cast<size_t>(round_up(plan.tiles * 4, 256));
}
}  // namespace

size_t w4_wgmma_scratch_bytes(const W4WgmmaPlan& plan, int64_t m, int64_t n_pad) {
  if (plan.splits <= 1) return 0;
  return counter_bytes(plan) +
         static_cast<size_t>(plan.splits) * static_cast<size_t>(m * n_pad) * 4;
}

int* w4_wgmma_counters(const W4WgmmaPlan& plan, void* scratch) {
  return plan.splits > 1 ? static_cast<int*>(scratch) : nullptr;
}

template <typename TOut>
void launch_w4_wgmma(const KParams& p, const W4WgmmaPlan& plan, void* scratch,
                     cudaStream_t stream) {
  SplitK sk{nullptr, nullptr, p.nchunks};
  if (plan.splits > 1) {
    sk.counters = w4_wgmma_counters(plan, scratch);
    sk.partial = reinterpret_cast<float*>(static_cast<uint8_t*>(scratch) + counter_bytes(plan));
    sk.chunks = plan.chunks_per_split;
  }
  const int nt = plan.nt, wg = plan.wg;
  if (nt == 16)
    return wg == 2 ? launch<16, 2, TOut>(p, plan, sk, stream)
                   : launch<16, 1, TOut>(p, plan, sk, stream);
  if (nt == 32)
    return wg == 2 ? launch<32, 2, TOut>(p, plan, sk, stream)
                   : launch<32, 1, TOut>(p, plan, sk, stream);
  return wg == 2 ? launch<64, 2, TOut>(p, plan, sk, stream)
                 : launch<64, 1, TOut>(p, plan, sk, stream);
}

template void launch_w4_wgmma<float>(const KParams&, const W4WgmmaPlan&, void*, cudaStream_t);
template void launch_w4_wgmma<bf16>(const KParams&, const W4WgmmaPlan&, void*, cudaStream_t);

}  // namespace kite::cuda::quant_detail

namespace kite::cuda {
void set_w4_wgmma_shape(int nt, int wg, int splits) {
  quant_detail::g_nt = nt;
  quant_detail::g_wg = wg;
  quant_detail::g_splits = splits;
}
}  // namespace kite::cuda
