// Where a bulk-copy streaming launch's fixed cost goes (BENCHMARKS.md run 11 fits ~10.7 us per
// decode GEMV launch on top of its bytes at 4.47 TB/s):
//   ./build-cuda/kite_cuda_tests --gtest_also_run_disabled_tests \
//       --gtest_filter='CudaBench.DISABLED_BenchLaunchGaps'
// A stand-in for the decode GEMV's ring (one persistent block per SM, a producer thread copying
// 8 rows x 4 KB tiles into 4 stages, 8 consumer warps reading every byte of each tile) stamps
// %globaltimer in every block: at its start, when its first tile has landed, and after its last
// tile. Sixteen launches run back to back, each on its own weights, as in a decode step:
//   wait: consumers pdl_wait() before the first tile (as a GEMV waits for x), then pdl_trigger();
//   free: consumers only pdl_trigger() (no dependency: what the stream alone costs);
//   plain: no PDL attribute, so each launch starts when the one before has ended.
// (Launched through launch_pdl_if, so KITE_CUDA_NO_PDL=1 makes every mode plain.)
// Per launch (steady state: launches 4-15, averaged): the time from the previous launch's last
// block end to this one's (period), how late this launch's first tiles land after the previous
// ended, and the spread of its blocks' end times (tail).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/dot_bf16.cuh"
#include "kernels/cuda/launch_pdl.cuh"

namespace kite::cuda {
namespace {

using namespace testing;

constexpr int kRows = 8, kRowBytes = 4096, kStages = 4;
constexpr int kTileBytes = kRows * kRowBytes;
constexpr int kSmem = kStages * kTileBytes + 2 * kStages * 8 + 64 * 4;

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// stamps[block * 3 + {0, 1, 2}]: start, first tile landed, last tile consumed.
// Features of the decode MoE kernels, to find which one costs (the plain form is WARPS 8):
//   WARPS 16: two consumer warps per tile row;
//   SYNC: after each tile, a warp sum and two barriers among the consumers (the MoE's group end);
//   SPLIT: tile rows 4-7 from the other half of the weights (gate_up's up rows);
//   X: every tile also reads its 4 KB chunk of an 8 KB vector through __ldg (the GEMV's x);
//   DOT: the consumers do the gate_up kernel's arithmetic instead of an XOR: bf16 dot products
//     with x held in registers, and at each tile's end silu(gate) * up stored by four lanes.
template <int WARPS, bool SYNC, bool SPLIT, bool X = false, bool DOT = false>
__global__ void __launch_bounds__(WARPS * 32 + 32, 1)
    ring_stream_kernel(const uint8_t* __restrict__ w, int64_t tiles, uint64_t* stamps, float* sink,
                       bool wait, const uint4* __restrict__ x) {
  constexpr int kConsumers = WARPS * 32;
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kTileBytes);
  uint64_t* empty = full + kStages;
  float* partial = reinterpret_cast<float*>(empty + kStages);
  if (threadIdx.x == 0) {
    stamps[blockIdx.x * 3] = now_ns();
    mbar_init_ring(full, empty, kStages, kConsumers);
  }
  __syncthreads();
  const int64_t mine = blockIdx.x < tiles ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers) {
      const uint64_t policy = l2_evict_first_policy();
      for (int64_t i = 0; i < mine; ++i) {
        const int s = ring_slot_to_fill<kStages>(empty, i);
        const int64_t t = blockIdx.x + i * gridDim.x;
        mbar_arrive_expect_tx(&full[s], kTileBytes);
        for (int r = 0; r < kRows; ++r) {
          // SPLIT: rows 0-3 of tile t from the first half of the weights, rows 4-7 from the
          // second half (every byte still read once).
          const int64_t at =
              SPLIT ? (r < kRows / 2 ? t * kTileBytes / 2 + r * kRowBytes
                                     : (tiles + t) * kTileBytes / 2 + (r - kRows / 2) * kRowBytes)
                    : t * kTileBytes + r * kRowBytes;
          bulk_copy_g2s(smem + s * kTileBytes + r * kRowBytes, w + at, kRowBytes, &full[s], policy);
        }
      }
    }
    return;
  }
  if (wait) pdl_wait();
  pdl_trigger();
  uint32_t acc = 0;
  float facc = 0.0f;
  constexpr int kPerLane = kTileBytes / 16 / kConsumers;
  uint4 xv[kPerLane];
  if constexpr (DOT) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) xv[j] = __ldg(x + (threadIdx.x + j * kConsumers) % 512);
  }
  for (int64_t i = 0; i < mine; ++i) {
    const int s = ring_slot_filled<kStages>(full, i);
    if (i == 0 && threadIdx.x == 0) stamps[blockIdx.x * 3 + 1] = now_ns();
    const uint4* tile = reinterpret_cast<const uint4*>(smem + s * kTileBytes);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const uint4 v = tile[threadIdx.x + j * kConsumers];
      if constexpr (DOT)
        dot8_bf16(v, xv[j], facc);
      else
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if constexpr (X) {
      const uint4* xc = x + (i % 2) * (kRowBytes / 16);
#pragma unroll
      for (int j = 0; j < kRowBytes / 16 / 32; ++j) {
        const uint4 v = __ldg(xc + threadIdx.x % 32 + j * 32);
        acc += v.x ^ v.w;
      }
    }
    mbar_arrive(&empty[s]);
    if constexpr (SYNC) {
      const float v = warp_sum(DOT ? facc : static_cast<float>(acc & 0xff));
      if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
      consumers_sync(kConsumers);
      if constexpr (DOT) {
        if (threadIdx.x % 32 == 0 && threadIdx.x / 32 < 4) {
          const int w4 = threadIdx.x / 32;
          const float gate = partial[w4] + partial[w4 + 8], up = partial[w4 + 4] + partial[w4 + 12];
          sink[(blockIdx.x * 4 + w4 + i * 4 * gridDim.x) % 4096] = gate / (1.0f + expf(-gate)) * up;
        }
        facc = 0.0f;
      } else if (threadIdx.x < WARPS / 2 && partial[threadIdx.x] == 1e30f) {
        sink[0] = 2.0f;
      }
      consumers_sync(kConsumers);
    }
  }
  consumers_sync(kConsumers);
  if (threadIdx.x == 0) stamps[blockIdx.x * 3 + 2] = now_ns();
  if (acc == 0x12345678u) sink[blockIdx.x] = 1.0f;  // practically never: keeps the reads
}

struct LaunchTimes {
  double start_min, start_max, first_med, end_min, end_max;  // ns
};

template <int WARPS, bool SYNC, bool SPLIT, bool X = false, bool DOT = false>
void run_config(const char* mode, int64_t bytes, const Tensor& buf, int sms) {
  auto* kernel = ring_stream_kernel<WARPS, SYNC, SPLIT, X, DOT>;
  static Tensor x = [] {
    Tensor t = device_empty({2048}, DType::kF32);  // 8 KB
    fill_uniform(t, -1.0f, 1.0f, 9, test_stream());
    return t;
  }();
  KITE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  constexpr int kLaunches = 16;
  const int64_t tiles = bytes / kTileBytes;
  const int64_t span = buf.size_bytes() / bytes;  // distinct weight regions
  Tensor stamps = device_empty({int64_t{kLaunches} * sms * 3}, DType::kI64);
  Tensor sink = device_empty({4096}, DType::kF32);
  const bool wait = std::string(mode) == "wait", pdl = std::string(mode) != "plain";
  for (int l = 0; l < kLaunches; ++l) {
    const auto* w = static_cast<const uint8_t*>(buf.raw()) + (l % span) * bytes;
    auto* st = static_cast<uint64_t*>(stamps.raw()) + int64_t{l} * sms * 3;
    launch_pdl_if(pdl, kernel, dim3(static_cast<unsigned>(sms)), WARPS * 32 + 32, kSmem,
                  test_stream(), w, tiles, st, static_cast<float*>(sink.raw()), wait,
                  static_cast<const uint4*>(x.raw()));
  }
  KITE_CUDA_CHECK_LAUNCH();
  const Tensor host = to_host(stamps, test_stream());
  const auto* s = host.data<int64_t>();
  std::vector<LaunchTimes> lt;
  for (int l = 0; l < kLaunches; ++l) {
    std::vector<double> st, fi, en;
    for (int b = 0; b < sms; ++b) {
      const int64_t* p = s + (int64_t{l} * sms + b) * 3;
      st.push_back(static_cast<double>(p[0]));
      fi.push_back(static_cast<double>(p[1]));
      en.push_back(static_cast<double>(p[2]));
    }
    std::sort(st.begin(), st.end());
    std::sort(fi.begin(), fi.end());
    std::sort(en.begin(), en.end());
    lt.push_back({st.front(), st.back(), fi[fi.size() / 2], en.front(), en.back()});
  }
  double period = 0, start_late = 0, first_late = 0, tail = 0, first_spread = 0;
  int n = 0;
  for (int l = 4; l < kLaunches; ++l, ++n) {
    period += lt[l].end_max - lt[l - 1].end_max;
    start_late += lt[l].start_max - lt[l - 1].end_max;
    first_late += lt[l].first_med - lt[l - 1].end_max;
    tail += lt[l].end_max - lt[l].end_min;
    first_spread += lt[l].start_min - lt[l - 1].end_min;
  }
  const double us = 1e-3 / n;
  std::printf(
      "BENCH launch gaps w%d%s%s%s%s %-5s %6.1f MB: period %6.2f us (%5.0f GB/s), last start "
      "%+6.2f, median "
      "first tile %+6.2f after prev end; own end spread %5.2f; first start after prev first end "
      "%+6.2f\n",
      WARPS, SYNC ? " sync" : "", SPLIT ? " split" : "", X ? " x" : "", DOT ? " dot" : "", mode,
      bytes / 1e6, period * us, bytes / (period * us * 1e3), start_late * us, first_late * us,
      tail * us, first_spread * us);
  std::fflush(stdout);
}

TEST(CudaBench, DISABLED_BenchLaunchGaps) {
  int sms = 0;
  KITE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Tensor buf = device_empty({int64_t{1} << 29}, DType::kF32);  // 2 GiB
  fill_uniform(buf, -1.0f, 1.0f, 7, test_stream());
  for (int64_t mb : {16, 32, 92, 256, 1024})
    for (const char* mode : {"wait", "free", "plain"})
      run_config<8, false, false>(mode, mb << 20, buf, sms);
  // The MoE kernels' features one at a time, at gate_up's size (92 MB).
  run_config<16, false, false>("wait", 92 << 20, buf, sms);
  run_config<8, true, false>("wait", 92 << 20, buf, sms);
  run_config<16, true, false>("wait", 92 << 20, buf, sms);
  run_config<8, false, true>("wait", 92 << 20, buf, sms);
  run_config<16, true, true>("wait", 92 << 20, buf, sms);
  run_config<16, true, true>("wait", 46 << 20, buf, sms);
  // gate_up's arithmetic (92 MB, then down's size).
  run_config<16, true, true, false, true>("wait", 92 << 20, buf, sms);
  run_config<16, true, true, false, true>("wait", 46 << 20, buf, sms);
  // The GEMV's x reads (the dense decode GEMV's shape: 8 warps, x through __ldg every tile).
  for (int64_t mb : {32, 92, 256}) {
    run_config<8, false, false>("wait", mb << 20, buf, sms);
    run_config<8, false, false, true>("wait", mb << 20, buf, sms);
    run_config<8, true, false, true>("wait", mb << 20, buf, sms);
  }
}

}  // namespace
}  // namespace kite::cuda
