// Timing of the CUDA quantized linear (kernels/cuda/quant/quant_linear.h), never run by default:
//   kite_cuda_tests --gtest_also_run_disabled_tests --gtest_filter='CudaQuantLinearBench.*'
// Figures go to docs/BENCHMARKS.md with their command, GPU and date.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm/blaslt.h"
#include "kernels/cuda/quant/quant_linear.h"
#include "quant/quantized_weight.h"

namespace kite::cuda {
namespace {

using namespace testing;

// Timing (run with --gtest_also_run_disabled_tests --gtest_filter='*Bench*'): M x N x K for
// BF16 (cuda::linear: the GEMV for M <= 8, cuBLASLt above) and the four quantized formats, on
// dummy weights, 4 copies rotated so the weights come from HBM, not L2 (each copy of the
// smallest, W4 4096x14336, is 29 MB; L2 is 50 MB). Median of 50 timed calls (events around
// each), after 10 warm-up calls. GB/s = weight bytes (codes + scales + zeros) / time.

// Random BF16 weights in [-0.02, 0.02) (host LCG, one upload, device copies for the rest).
std::vector<Tensor> random_bf16_copies(int64_t n, int64_t k, int copies) {
  std::vector<uint16_t> h(static_cast<size_t>(n * k));
  uint32_t st = 12345;
  for (auto& v : h) {
    st = st * 1664525u + 1013904223u;
    v = f32_to_bf16((static_cast<float>(st >> 8) / 16777216.0f - 0.5f) * 0.04f);
  }
  std::vector<Tensor> w;
  for (int c = 0; c < copies; ++c) {
    w.push_back(device_empty({n, k}, DType::kBF16));
    KITE_CUDA_CHECK(cudaMemcpy(w.back().raw(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  return w;
}

// Two timings per row, medians: `single` = events around one call after a synchronize (launch
// latency included, as the first version of this bench measured); `stream` = 20 calls back to
// back between two events, per call (what a captured decode step sees; PDL overlap included).
template <typename Fn>
std::pair<double, double> time_us(Fn&& fn, int copies) {
  cudaStream_t s = test_stream();
  for (int i = 0; i < 10; ++i) fn(i % copies);
  KITE_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t1, t2;
  for (int i = 0; i < 30; ++i) {
    cudaEventRecord(e0, s);
    fn(i % copies);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    t1.push_back(ms);
  }
  constexpr int kBatch = 20;
  for (int r = 0; r < 9; ++r) {
    cudaEventRecord(e0, s);
    for (int i = 0; i < kBatch; ++i) fn(i % copies);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    t2.push_back(ms / kBatch);
  }
  KITE_CUDA_CHECK(cudaGetLastError());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(t1.begin(), t1.end());
  std::sort(t2.begin(), t2.end());
  return {t1[t1.size() / 2] * 1e3, t2[t2.size() / 2] * 1e3};
}

// Llama-3-8B's four decode linears (N, K): down, o, q/k/v, the stacked gate_up.
constexpr std::pair<int64_t, int64_t> kLlamaDecodeShapes[] = {
    {4096, 14336}, {4096, 4096}, {6144, 4096}, {28672, 4096}};

// time_us of BF16's cuda::linear over the weight copies `wb` (M rows of dx into y).
std::pair<double, double> time_bf16(const Tensor& dx, const std::vector<Tensor>& wb, Tensor& y) {
  return time_us([&](int c) { linear(test_blas(), dx, wb[c], nullptr, y, test_stream()); },
                 static_cast<int>(wb.size()));
}

// time_us of quantized_linear over the weight copies `w` (M rows of dx into y), with a workspace
// sized for the route the overrides set now.
std::pair<double, double> time_quantized(const Tensor& dx,
                                         const std::vector<DeviceQuantizedWeight>& w, Tensor& y,
                                         int64_t m) {
  DeviceBuffer ws(std::max<size_t>(quantized_linear_workspace_bytes(w[0], m), 256));
  return time_us(
      [&](int c) {
        quantized_linear(test_blas(), dx, w[c], nullptr, y, ws.data(), ws.size_bytes(),
                         test_stream());
      },
      static_cast<int>(w.size()));
}

TEST(CudaQuantLinearBench, DISABLED_Bench) {
  constexpr int kCopies = 4;
  // KITE_QBENCH_DEEPSEEK=1: DeepSeek-V2-Lite's dense linears instead (q, kv_a, kv_b, o, the
  // shared experts' gate_up and down).
  const bool ds = std::getenv("KITE_QBENCH_DEEPSEEK") != nullptr;
  const std::vector<std::pair<int64_t, int64_t>> shapes =
      ds ? std::vector<std::pair<int64_t, int64_t>>{{3072, 2048}, {576, 2048},  {4096, 512},
                                                    {2048, 2048}, {5632, 2048}, {2048, 2816}}
         : std::vector<std::pair<int64_t, int64_t>>{
               {4096, 14336}, {8192, 8192}, {4096, 4096}, {6144, 4096}, {28672, 4096}};  // (N, K)
  const QuantFormat formats[] = {QuantFormat::kInt4Group, QuantFormat::kFp8PerChannel,
                                 QuantFormat::kInt8PerChannel, QuantFormat::kFp8Block};
  std::printf("%-17s %-7s %2s %5s %6s %9s %9s %8s %6s %6s\n", "format", "path", "M", "N", "K",
              "us_single", "us_stream", "GB/s", "MB", "x_bf16");
  auto rng = test_rng();
  for (const auto& [n, k] : shapes) {
    const std::vector<Tensor> wb = random_bf16_copies(n, k, kCopies);
    std::vector<std::vector<DeviceQuantizedWeight>> wq;
    for (QuantFormat f : formats) {
      wq.emplace_back();
      for (int c = 0; c < kCopies; ++c) wq.back().push_back(dummy_quantized(f, n, k, c + 1, test_stream()));
    }
    for (int64_t m : {1, 2, 4, 8}) {
      const Tensor dx = upload(random_host({m, k}, rng), DType::kBF16);
      Tensor y = device_empty({m, n}, DType::kBF16);
      const auto [bs, bt] = time_bf16(dx, wb, y);
      const double bbytes = static_cast<double>(n * k * 2);
      std::printf("%-17s %-7s %2ld %5ld %6ld %9.2f %9.2f %8.1f %6.1f %6.2f\n", "bf16", "gemv", m, n,
                  k, bs, bt, bbytes / bt / 1e3, bbytes / 1e6, 1.0);
      for (size_t fi = 0; fi < 4; ++fi) {
        const auto& w = wq[fi];
        struct V { const char* name; int path, kw, u; };
        std::vector<V> vs = {{"decode", 2, 0, 0}, {"mma", 1, 0, 0}, {"bulk", 3, 0, 0}};
        if (fi == 1) vs.push_back({"a16", 5, 0, 0});  // FP8 with BF16 activations (W8A16)
        // The decode kernel's warps per tile and ring depth, INT4: at one row on every shape,
        // at every row count on the stacked gate_up.
        if (fi == 0 && (m == 1 || n == 28672))
          for (int kw : {1, 2, 4, 8, 16})
            for (int u : {2, 4}) vs.push_back({u == 4 ? "kwU4" : "kwU2", 2, kw, u});
        for (const V& v : vs) {
          set_quant_decode_override(v.path, v.kw, v.u);
          const auto [qs, qt] = time_quantized(dx, w, y, m);
          set_quant_decode_override(0);
          const double bytes = static_cast<double>(w[0].storage_bytes());
          std::printf("%-17s %-4s%3d %2ld %5ld %6ld %9.2f %9.2f %8.1f %6.1f %6.2f\n",
                      std::string(quant_format_name(formats[fi])).c_str(), v.name, v.kw, m, n, k,
                      qs, qt, bytes / qt / 1e3, bytes / 1e6, bt / qt);
        }
      }
      KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
    }
  }
}

// Batches past decode sizes (M = 16 .. 256), each format on its automatic route against the
// BF16 linear (cuBLASLt there): issue 7 asks W4A16 to stay fast from batch 1 to 64.
// An lm_head's shape (Llama-3's 128,256 x 4,096) with F32 output, the logits, at decode batch
// sizes: BF16 (cuda::linear) and the 8-bit formats through quantized_linear's routes (run once
// more with KITE_CUDA_LT_F32_OUT=0 for the kernels of quant_linear.cu past 16 rows).
TEST(CudaQuantLinearBench, DISABLED_LmHead) {
  constexpr int kCopies = 2;
  constexpr int64_t n = 128256, k = 4096;
  const std::vector<Tensor> wb = random_bf16_copies(n, k, kCopies);
  const QuantFormat formats[] = {QuantFormat::kInt8PerChannel, QuantFormat::kFp8PerChannel};
  std::vector<std::vector<DeviceQuantizedWeight>> wq;
  for (QuantFormat f : formats) {
    wq.emplace_back();
    for (int c = 0; c < kCopies; ++c)
      wq.back().push_back(dummy_quantized(f, n, k, c + 1, test_stream()));
  }
  std::printf("%-17s %3s %9s %8s %8s\n", "format", "M", "us_stream", "GB/s", "x_bf16");
  auto rng = test_rng();
  for (int64_t m : {1, 9, 16, 17, 24, 32, 48, 64, 96, 128}) {
    const Tensor dx = upload(random_host({m, k}, rng), DType::kBF16);
    Tensor y = device_empty({m, n}, DType::kF32);
    const double bt = time_bf16(dx, wb, y).second;
    std::printf("%-17s %3ld %9.2f %8.1f %8.2f\n", "bf16", m, bt,
                static_cast<double>(n * k * 2) / bt / 1e3, 1.0);
    for (size_t fi = 0; fi < 2; ++fi) {
      const auto& w = wq[fi];
      const double qt = time_quantized(dx, w, y, m).second;
      std::printf("%-17s %3ld %9.2f %8.1f %8.2f\n",
                  std::string(quant_format_name(formats[fi])).c_str(), m, qt,
                  static_cast<double>(w[0].storage_bytes()) / qt / 1e3, bt / qt);
    }
  }
}

// FP8 / INT8 per channel from 9 to 16 rows on the bulk GEMV's token tiles ("bulk") against the
// route before them ("pre", set_quant_bulk_rows(8): the tensor-core kernel), on Llama-3-8B's four
// decode linears, BF16 output, beside BF16's cuBLASLt GEMM; µs a call back to back (the
// activation-quantization launch included).
TEST(CudaQuantLinearBench, DISABLED_EightBitMidRows) {
  constexpr int kCopies = 4;
  std::printf("%-5s %3s %5s %6s %9s %9s %9s %9s %9s %9s\n", "", "M", "N", "K", "bf16", "fp8_bulk",
              "fp8_w8a8", "fp8_pre", "int8_bulk", "int8_pre");
  for (const auto& [n, k] : kLlamaDecodeShapes) {
    const std::vector<Tensor> wb = random_bf16_copies(n, k, kCopies);
    std::vector<DeviceQuantizedWeight> w8[2];
    for (int c = 0; c < kCopies; ++c) {
      w8[0].push_back(dummy_quantized(QuantFormat::kFp8PerChannel, n, k, c + 1, test_stream()));
      w8[1].push_back(dummy_quantized(QuantFormat::kInt8PerChannel, n, k, c + 1, test_stream()));
    }
    auto rng = test_rng();
    for (int64_t m : {9, 12, 16}) {
      const Tensor dx = upload(random_host({m, k}, rng), DType::kBF16);
      Tensor y = device_empty({m, n}, DType::kBF16);
      const double bt = time_bf16(dx, wb, y).second;
      double t[2][2];
      for (int f = 0; f < 2; ++f)
        for (int rows : {16, 8}) {
          set_quant_bulk_rows(rows);
          t[f][rows == 8] = time_quantized(dx, w8[f], y, m).second;
        }
      set_quant_bulk_rows(16);
      set_quant_decode_override(3);  // FP8 on codes quantized by a kernel before (W8A8)
      const double w8a8 = time_quantized(dx, w8[0], y, m).second;
      set_quant_decode_override(0);
      std::printf("%-5s %3ld %5ld %6ld %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", "mid", m, n, k, bt,
                  t[0][0], w8a8, t[0][1], t[1][0], t[1][1]);
    }
    KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
  }
}

TEST(CudaQuantLinearBench, DISABLED_MidBatch) {
  constexpr int kCopies = 4;
  const QuantFormat formats[] = {QuantFormat::kInt4Group, QuantFormat::kFp8PerChannel,
                                 QuantFormat::kInt8PerChannel, QuantFormat::kFp8Block};
  std::printf("%-17s %3s %5s %6s %9s %8s %8s\n", "format", "M", "N", "K", "us_stream", "GB/s",
              "x_bf16");
  const char* only_n = std::getenv("KITE_MIDBATCH_N");  // one shape only (profiling)
  const char* only_m = std::getenv("KITE_MIDBATCH_M");  // one row count only
  for (const auto& [n, k] : kLlamaDecodeShapes) {
    if (only_n && std::atoll(only_n) != n) continue;
    const std::vector<Tensor> wb = random_bf16_copies(n, k, kCopies);
    std::vector<std::vector<DeviceQuantizedWeight>> wq;
    for (QuantFormat f : formats) {
      wq.emplace_back();
      for (int c = 0; c < kCopies; ++c)
        wq.back().push_back(dummy_quantized(f, n, k, c + 1, test_stream()));
    }
    auto rng = test_rng();
    for (int64_t m : {16, 32, 64, 128, 256, 512, 2048}) {
      if (only_m && std::atoll(only_m) != m) continue;
      const Tensor dx = upload(random_host({m, k}, rng), DType::kBF16);
      Tensor y = device_empty({m, n}, DType::kBF16);
      const double bt = time_bf16(dx, wb, y).second;
      std::printf("%-17s %3ld %5ld %6ld %9.2f %8.1f %8.2f\n", "bf16", m, n, k, bt,
                  static_cast<double>(n * k * 2) / bt / 1e3, 1.0);
      for (size_t fi = 0; fi < 4; ++fi) {
        const auto& w = wq[fi];
        const double qt = time_quantized(dx, w, y, m).second;
        std::printf("%-17s %3ld %5ld %6ld %9.2f %8.1f %8.2f\n",
                    std::string(quant_format_name(formats[fi])).c_str(), m, n, k, qt,
                    static_cast<double>(w[0].storage_bytes()) / qt / 1e3, bt / qt);
        if (fi == 0) {
          // W4A16 on each of its kernels: the tensor-core kernel (-1) and the wgmma GEMM (1) on
          // its own plan and on each tokens x warpgroups x K-splits shape; the lean decode
          // kernel (the automatic row above up to 32 rows) kept off them.
          struct Variant {
            std::string name;
            int mode, nt, wg, splits;
          };
          std::vector<Variant> variants = {{"int4_decode", 0, 0, 0, 0},
                                           {"int4_qmma_kernel", -1, 0, 0, 0},
                                           {"int4_wgmma", 1, 0, 0, 0}};
          for (int nt : {16, 32, 64})
            for (int wg : {1, 2})
              for (int splits : {1, 2, 4, 8})
                variants.push_back({"int4_wgmma_" + std::to_string(nt) + "x" + std::to_string(wg) +
                                        "/" + std::to_string(splits),
                                    1, nt, wg, splits});
          for (const Variant& v : variants) {
            if (v.nt > 16 && v.nt / 2 >= m) continue;  // more token slots than twice M
            if (m > 128 && (v.mode < 1 || v.splits > 1)) continue;  // decode-side kernels only
            if (m <= 8 && v.mode == 0) continue;
            set_w4_gemm_override(v.mode);
            set_w4_wgmma_shape(v.nt, v.wg, v.splits);
            set_w4_decode_rows(v.name == "int4_decode" ? 128 : 8);
            const double ot = time_quantized(dx, w, y, m).second;
            std::printf("%-17s %3ld %5ld %6ld %9.2f %8.1f %8.2f\n", v.name.c_str(), m, n, k, ot,
                        static_cast<double>(w[0].storage_bytes()) / ot / 1e3, bt / ot);
          }
          set_w4_gemm_override(0);
          set_w4_wgmma_shape(0, 0, 0);
          set_w4_decode_rows(32);
        }
      }
      KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
    }
  }
}

}  // namespace
}  // namespace kite::cuda
