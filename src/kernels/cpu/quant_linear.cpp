// quantized_linear on the CPU: fake-quantized activations × weight tiles dequantized to fp32,
// one sgemm per tile (see kernels/quant_ops.h for why this is the reference numerics).
#ifndef KITE_NO_BLAS
#include <cblas.h>
#endif

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/blas_setup.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/quant_ops.h"

namespace kite::ops {
namespace {

constexpr const char* kOp = "quantized_linear";
// Output rows dequantized at once: large enough for an efficient GEMM, small enough that the
// fp32 tile (rows × K floats) stays a few MB for K up to ~8k.
constexpr int64_t kTileRows = 256;

// Up to this many rows (decode) each weight row is decoded and dotted with the activations
// while it is in L1 (L2 past K = 12 K), instead of decoding [256, K] tiles for one GEMM: a 256-row tile (1 MB at
// K = 1,024) written and read back through L2 / L3 made INT4 and FP8 decode slower than fp32 on
// a model past the caches (Qwen2.5-0.5B on the 2-core dev machine: 103 and 142 ms a step
// against 74; docs/BENCHMARKS.md, "CPU decode"). Rows are split over the OpenMP team from
// cpu::kParallelMinMadds multiply-adds, as BLAS calls are.
constexpr int64_t kRowDotMaxRows = 8;

// n floats of scratch for one call: the calling thread's kept buffer up to kKeptFloats (a
// fresh vector for a 256-row tile, past malloc's mmap threshold from K = 128, cost a zero fill
// and page faults on every call: a fifth of an FP8 decode step on kite-tiny), a vector of its
// own past that, so that a long prefill's activations are not held after it.
constexpr int64_t kKeptFloats = int64_t{1} << 22;  // 16 MiB
class Scratch {
 public:
  Scratch(std::vector<float>& kept, int64_t n) {
    std::vector<float>& use = n <= kKeptFloats ? kept : own_;
    if (static_cast<int64_t>(use.size()) < n) use.resize(static_cast<size_t>(n));
    data_ = use.data();
  }
  float* data() const { return data_; }

 private:
  std::vector<float> own_;
  float* data_;
};

// x (with input_scale applied) as the kernel's activation quantization sees it, [m, k], into a.
void prepare_activations(const Tensor& x, const QuantizedWeight& w, int64_t m, float* a) {
  const int64_t k = w.in_features;
  std::memcpy(a, x.data<float>(), static_cast<size_t>(m * k) * sizeof(float));
  if (w.input_scale.defined()) {
    const float* s = w.input_scale.data<float>();
    for (int64_t r = 0; r < m; ++r)
      for (int64_t i = 0; i < k; ++i) a[r * k + i] *= s[i];
  }
  switch (w.format) {
    case QuantFormat::kFp8PerChannel:
      fake_quantize_fp8_rows(a, m, k, k);
      break;
    case QuantFormat::kFp8Block:
      fake_quantize_fp8_rows(a, m, k, w.block_cols);
      break;
    case QuantFormat::kInt8PerChannel:
      fake_quantize_int8_rows(a, m, k);
      break;
    case QuantFormat::kInt4Group:
      break;
  }
}

}  // namespace

void quantized_linear(const Tensor& x, const QuantizedWeight& w, const Tensor* bias, Tensor& y) {
  cpu::check_f32(x, kOp, "x");
  cpu::check_f32(y, kOp, "y");
  const int64_t n = w.out_features, k = w.in_features;
  const int64_t m = cpu::rows_with_width(x, k, kOp, "x");
  KITE_OP_CHECK(y.size(-1) == n && y.numel() == m * n, kOp,
                "y " + cpu::shape_of(y) + " must be [" + std::to_string(m) + ", " +
                    std::to_string(n) + "] for x " + cpu::shape_of(x));
  KITE_OP_CHECK(!cpu::overlaps(x, y), kOp, "y must not alias x");
  KITE_OP_CHECK(w.codes.defined() && w.scales.defined(), kOp, "weight has no codes or scales");
  if (bias) {
    cpu::check_f32(*bias, kOp, "bias");
    KITE_OP_CHECK(bias->numel() == n, kOp, "bias must have " + std::to_string(n) + " values");
  }
  if (m == 0 || n == 0) return;
  float* out = y.data<float>();
  for (int64_t r = 0; r < m; ++r) {
    if (bias)
      std::memcpy(out + r * n, bias->data<float>(), n * sizeof(float));
    else
      std::fill(out + r * n, out + (r + 1) * n, 0.0f);
  }
  thread_local std::vector<float> kept_activations, kept_tile;
  const Scratch activations(kept_activations, m * k);
  float* a = activations.data();
  prepare_activations(x, w, m, a);
  if (m <= kRowDotMaxRows) {
    // Each weight row decoded into a buffer that stays in the core's cache, dotted with the m rows.
#pragma omp parallel if (m * n * k >= cpu::kParallelMinMadds)
    {
      thread_local std::vector<float> kept_row;
      const Scratch row(kept_row, k);
#pragma omp for schedule(static)
      for (int64_t j = 0; j < n; ++j) {
        w.dequantize_rows(j, j + 1, row.data());
        for (int64_t t = 0; t < m; ++t) out[t * n + j] += cpu::dot(a + t * k, row.data(), k);
      }
    }
    return;
  }
  cpu::ensure_blas_ready();
  // Tiles of at most kTileRows rows, as many as a multiple of the team so that every thread gets
  // the same rows; a thread decodes a tile and runs a one-thread sgemm on it, so no team is woken
  // per tile (a 256-row tile's decode ran on one thread while the other waited, and each tile's
  // sgemm forked its own team).
  const bool team = m * n * k >= cpu::kParallelMinMadds && n > kTileRows;
  const int64_t threads = team ? omp_get_max_threads() : 1;
  const int64_t tiles = (n + kTileRows * threads - 1) / (kTileRows * threads) * threads;
  const int64_t tile_rows = (n + tiles - 1) / tiles;
  // Decodes tile t into `tile` and adds its product to out (a one-thread sgemm in a team).
  auto tile_gemm = [&](int64_t t, float* tile) {
    const int64_t n0 = t * tile_rows, tn = std::min(tile_rows, n - n0);
    if (tn <= 0) return;
    w.dequantize_rows(n0, n0 + tn, tile);
#ifdef KITE_NO_BLAS  // the GPU build's reference loop (CMakeLists.txt, KITE_BLAS)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < tn; ++j) {
        float acc = 0.0f;
        for (int64_t c = 0; c < k; ++c) acc += a[i * k + c] * tile[j * k + c];
        out[i * n + n0 + j] += acc;
      }
#else
    const cpu::BlasThreadsFor blas_threads(team ? 0 : m * tn * k);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(tn),
                static_cast<int>(k), 1.0f, a, static_cast<int>(k), tile, static_cast<int>(k), 1.0f,
                out + n0, static_cast<int>(n));
#endif
  };
  // No parallel region at all without a team: with this loop inside an inactive `omp parallel
  // if`, kite-tiny's INT4 512-token prefill (BLAS forking its own team in there) was ~5 % slower.
  if (!team) {
    const Scratch tile_scratch(kept_tile, tile_rows * k);
    for (int64_t t = 0; t < tiles; ++t) tile_gemm(t, tile_scratch.data());
    return;
  }
#pragma omp parallel
  {
    const Scratch tile_scratch(kept_tile, tile_rows * k);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) tile_gemm(t, tile_scratch.data());
  }
}

}  // namespace kite::ops
