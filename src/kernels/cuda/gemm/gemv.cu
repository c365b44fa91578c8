#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/env_switch.h"
#include "kernels/cuda/gemm/dot_bf16.cuh"
#include "kernels/cuda/gemm/gemv.h"
#include "kernels/cuda/gemm/gemv_out.cuh"
#include "kernels/cuda/launch_pdl.cuh"

namespace kite::cuda {
namespace {

// One warp per output feature (WARPS per block), UNROLL 16-byte weight loads per lane per step;
// with PIPE the next step's loads are issued before this step's FMAs (two steps in flight).
template <int M, typename TOut, int WARPS, int UNROLL, bool PIPE>
__global__ void __launch_bounds__(WARPS * 32)
    gemv_warp_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                     const TOut* __restrict__ bias, const OutSegments<TOut> out, int64_t n,
                     int64_t k) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * WARPS + warp;
  if (row >= n) return;
  const int64_t k8 = k / 8;
  const uint4* wr = reinterpret_cast<const uint4*>(w + row * k);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  constexpr int kStep = 32 * UNROLL;
  const int64_t full = k8 / kStep * kStep;  // columns covered by whole steps
  // The first weights are loaded before waiting for the kernel that writes x (PDL): the
  // stream of W starts while that kernel finishes.
  uint4 wv[UNROLL];
  if (full > 0) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) wv[u] = __ldcs(wr + lane + 32 * u);
  }
  pdl_wait();
  pdl_trigger();
  for (int64_t base = 0; base < full; base += kStep) {
    uint4 nv[UNROLL];
    if (PIPE && base + kStep < full) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) nv[u] = __ldcs(wr + base + kStep + lane + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int m = 0; m < M; ++m)
        dot8_bf16(wv[u], __ldg(xr + m * k8 + base + lane + 32 * u), acc[m]);
    if (base + kStep < full) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        wv[u] = PIPE ? nv[u] : __ldcs(wr + base + kStep + lane + 32 * u);
    }
  }
  for (int64_t i = full + lane; i < k8; i += 32) {
    const uint4 v = __ldcs(wr + i);
#pragma unroll
    for (int m = 0; m < M; ++m) dot8_bf16(v, __ldg(xr + m * k8 + i), acc[m]);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = warp_sum(acc[m]);
  if (lane == 0) write_feature<M>(out, bias, row, acc);
}

// The kernel shape: 8 warps per block, 4 loads in flight per lane, no software pipelining.
// Measured on the H200 against 8/4 pipelined, 4/8 pipelined, 16/2 pipelined and 8/8 (BENCHMARKS.md,
// "decode GEMV shapes"): all within a few percent of each other on the Llama-3-8B shapes.
constexpr int kWarps = 8, kUnroll = 4;
constexpr bool kPipelined = false;

template <typename TOut, int WARPS, int UNROLL, bool PIPE>
void launch_shape(const bf16* xp, const bf16* wp, const TOut* bp, const OutSegments<TOut>& yp,
                  int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + WARPS - 1) / WARPS));
  with_rows(m, [&](auto rows) {
    launch_pdl(gemv_warp_kernel<decltype(rows)::value, TOut, WARPS, UNROLL, PIPE>, grid, WARPS * 32,
               0, stream, xp, wp, bp, yp, n, k);
  });
  KITE_CUDA_CHECK_LAUNCH();
}

// KITE_CUDA_GEMV=warp|bulk forces one kernel for a whole run (an A/B switch for the model
// benchmarks); unset or anything else: kAuto.
GemvKernel kernel_from_env() {
  const char* v = std::getenv("KITE_CUDA_GEMV");
  const std::string name = v ? v : "";
  if (name == "warp") return GemvKernel::kWarpPerRow;
  if (name == "bulk") return GemvKernel::kBulk;
  return GemvKernel::kAuto;
}

GemvKernel g_kernel = kernel_from_env();

int64_t bulk_min_bytes() {
  static const int64_t bytes = env_number("KITE_CUDA_GEMV_BULK_MIN", kGemvBulkMinBytes);
  return bytes;
}

GemvKernel choose(int64_t m, int64_t n, int64_t k) {
  if (g_kernel != GemvKernel::kAuto) return g_kernel;
  // Measured on the H200 (BENCHMARKS.md, run 5): at M = 1 the bulk stream is
  // up to 1.2x faster on the large shapes (gate_up, lm_head) and level at ~33 MB (o of
  // Llama-3-8B) in isolation, where inside a step its weight stream starts before the kernel
  // ahead finishes (PDL); below that (DeepSeek-V2-Lite's projections) and from M = 2 on — its 8
  // consumer warps per SM cannot keep up with the dot products of several rows — the warp
  // kernel is as fast or faster.
  return m == 1 && 2 * n * k >= bulk_min_bytes() ? GemvKernel::kBulk : GemvKernel::kWarpPerRow;
}

template <typename TOut>
void launch(const Tensor& x, const Tensor& w, const Tensor* bias, std::span<Tensor* const> ys,
            int64_t m, bool gated, cudaStream_t stream) {
  const int64_t n = w.size(0), k = w.size(1);
  const bf16* xp = x.data<bf16>();
  const bf16* wp = w.data<bf16>();
  const TOut* bp = bias ? bias->data<TOut>() : nullptr;
  OutSegments<TOut> yp{};
  yp.count = static_cast<int>(ys.size());
  yp.begin[0] = 0;
  for (size_t s = 0; s < ys.size(); ++s) {
    yp.y[s] = ys[s]->data<TOut>();
    yp.begin[s + 1] = yp.begin[s] + ys[s]->size(-1);
  }
  if (gated || choose(m, n, k) == GemvKernel::kBulk)
    launch_gemv_bulk<TOut>(xp, wp, bp, yp, m, n, k, gated, stream);
  else
    launch_shape<TOut, kWarps, kUnroll, kPipelined>(xp, wp, bp, yp, m, n, k, stream);
}


}  // namespace

void set_gemv_kernel(GemvKernel kernel) { g_kernel = kernel; }
GemvKernel gemv_kernel() { return g_kernel; }

namespace {
int64_t rows_from_env() {
  const int64_t r = env_number("KITE_CUDA_GEMV_ROWS", 0);
  return r >= 1 && r <= kGemvMaxRows ? r : 0;
}
int64_t g_gemv_rows = rows_from_env();  // 0: the rule (gemv.h)
}  // namespace

int64_t gemv_rows() { return g_gemv_rows; }
void set_gemv_rows(int64_t rows) { g_gemv_rows = std::clamp<int64_t>(rows, 0, kGemvMaxRows); }

bool gemv_applies(const Tensor& x, const Tensor& weight, const Tensor& y) {
  static const bool off = std::getenv("KITE_CUDA_NO_GEMV") != nullptr;  // A/B switch
  if (off) return false;
  if (x.dtype() != DType::kBF16 || weight.dtype() != DType::kBF16) return false;
  if (y.dtype() != DType::kBF16 && y.dtype() != DType::kF32) return false;
  const int64_t k = weight.size(1);
  if (k <= 0 || k % 8 != 0) return false;
  const int64_t m = x.numel() / k;
  if (m < 1 || m > kGemvMaxRows) return false;
  if (g_gemv_rows > 0 ? m > g_gemv_rows
                      : m > 1 && weight.size_bytes() >= static_cast<size_t>(kGemvMultiRowMaxBytes))
    return false;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return aligned(x.raw()) && aligned(weight.raw());
}

void gemv(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y, int64_t m,
          cudaStream_t stream) {
  Tensor* ys[] = {&y};
  gemv_split(x, weight, bias, ys, m, stream);
}

void gemv_split(const Tensor& x, const Tensor& weight, const Tensor* bias,
                std::span<Tensor* const> ys, int64_t m, cudaStream_t stream) {
  if (ys.empty() || ys.size() > static_cast<size_t>(kGemvMaxSegments))
    throw std::invalid_argument("gemv: 1 to " + std::to_string(kGemvMaxSegments) + " outputs");
  if (ys[0]->dtype() == DType::kF32)
    launch<float>(x, weight, bias, ys, m, false, stream);
  else
    launch<bf16>(x, weight, bias, ys, m, false, stream);
}

bool gemv_silu_mul_applies(const Tensor& x, const Tensor& gate_up, const Tensor& y) {
  if (!gemv_applies(x, gate_up, y)) return false;
  const int64_t n = gate_up.size(0), k = gate_up.size(1), m = x.numel() / k;
  return n % 2 == 0 && y.numel() == m * (n / 2) && choose(m, n, k) == GemvKernel::kBulk;
}

void gemv_silu_mul(const Tensor& x, const Tensor& gate_up, Tensor& y, int64_t m,
                   cudaStream_t stream) {
  Tensor* ys[] = {&y};
  if (y.dtype() == DType::kF32)
    launch<float>(x, gate_up, nullptr, ys, m, true, stream);
  else
    launch<bf16>(x, gate_up, nullptr, ys, m, true, stream);
}

}  // namespace kite::cuda
