// Timings on the GPU, run only on request (DISABLED_ tests):
//   ./build-cuda/kite_cuda_tests --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Bench*'
// Each prints one "BENCH" line: median time of 20 event-timed runs after 3 warm-ups, and the
// achieved rate against the H200's measured ceilings (about 4300 GB/s device-to-device and
// 790 TFLOP/s bf16 dense, per the workplace's notes). Inputs are random (fill_uniform), large
// enough to leave L2 (60 MB) except where a small, latency-bound shape is the point.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "attention_batch.h"
#include "cuda_test_util.h"
#include "kernels/cuda/attention/paged_attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/blaslt.h"
#include "kernels/cuda/gemm/gemv.h"
#include "kernels/cuda/moe/moe_decode.h"
#include "kernels/cuda/moe/moe_dispatch.h"
#include "kernels/cuda/moe/moe_routing.h"
#include "kernels/cuda/sampling/sampling.h"
#include "kernels/cuda/sampling/sampling_params_gpu.h"

namespace kite::cuda {
namespace {

using namespace testing;

constexpr double kPeakGBs = 4300.0;
constexpr double kPeakTflops = 790.0;

// Device time of what fn enqueues on the test stream, between two events.
template <typename F>
float event_ms(F&& fn) {
  cudaStream_t s = test_stream();
  cudaEvent_t start, stop;
  KITE_CUDA_CHECK(cudaEventCreate(&start));
  KITE_CUDA_CHECK(cudaEventCreate(&stop));
  KITE_CUDA_CHECK(cudaEventRecord(start, s));
  fn();
  KITE_CUDA_CHECK(cudaEventRecord(stop, s));
  KITE_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  KITE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

template <typename F>
double median_ms(F&& fn, int warmup = 3, int reps = 20) {
  for (int i = 0; i < warmup; ++i) fn();
  KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) times.push_back(event_ms(fn));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Per-call device time of call(0), call(1), ... run 64 at a time back to back (after 8 warm-up
// calls), as a decode step runs its launches: PDL overlap included, launch latency hidden.
template <typename F>
double per_call_ms(F&& call) {
  constexpr int kCalls = 64;
  for (int i = 0; i < 8; ++i) call(i);
  return event_ms([&] {
           for (int i = 0; i < kCalls; ++i) call(i);
         }) /
         kCalls;
}

void report_bytes(const std::string& name, double ms, double bytes) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("BENCH %-44s %10.1f us %9.1f GB/s   %5.1f%% of %.0f GB/s\n", name.c_str(), ms * 1e3,
              gbs, 100.0 * gbs / kPeakGBs, kPeakGBs);
  std::fflush(stdout);
}

void report_flops(const std::string& name, double ms, double flops) {
  const double tflops = flops / (ms * 1e-3) / 1e12;
  std::printf("BENCH %-44s %10.1f us %9.1f TFLOP/s %5.1f%% of %.0f TFLOP/s\n", name.c_str(),
              ms * 1e3, tflops, 100.0 * tflops / kPeakTflops, kPeakTflops);
  std::fflush(stdout);
}

Tensor random_device(const Shape& shape, DType dtype, uint64_t seed, float lo = -1.0f,
                     float hi = 1.0f) {
  Tensor t = device_empty(shape, dtype);
  fill_uniform(t, lo, hi, seed, test_stream());
  return t;
}

// Random BF16 [n, k] matrices, at least two and enough to total 512 MB, so that timed calls
// taking them in turn never find their weights in L2.
std::vector<Tensor> weight_copies(int64_t n, int64_t k, uint64_t seed) {
  const double bytes = 2.0 * n * k;
  const int copies = std::max(2, static_cast<int>((512e6 + bytes - 1) / bytes));
  std::vector<Tensor> ws;
  for (int c = 0; c < copies; ++c)
    ws.push_back(random_device({n, k}, DType::kBF16, seed + c, -0.05f, 0.05f));
  return ws;
}

TEST(CudaBench, DISABLED_BenchNorm) {
  const int64_t rows = 16384, hidden = 8192;
  const double elems = static_cast<double>(rows) * hidden;
  Tensor x = random_device({rows, hidden}, DType::kBF16, 1);
  Tensor res = random_device({rows, hidden}, DType::kBF16, 2);
  Tensor w = random_device({hidden}, DType::kBF16, 3, 0.5f, 1.5f);
  Tensor out = device_empty({rows, hidden}, DType::kBF16);
  double ms = median_ms([&] { rms_norm(x, w, 1e-6f, out, test_stream()); });
  report_bytes("rms_norm bf16 16384x8192", ms, 2 * elems * 2);
  ms = median_ms([&] { add_rms_norm(res, x, w, 1e-6f, out, test_stream()); });
  report_bytes("add_rms_norm bf16 16384x8192", ms, 4 * elems * 2);
  Tensor xs = random_device({64, 7168}, DType::kBF16, 4);
  Tensor ws = random_device({7168}, DType::kBF16, 5);
  Tensor os = device_empty({64, 7168}, DType::kBF16);
  ms = median_ms([&] { rms_norm(xs, ws, 1e-6f, os, test_stream()); });
  report_bytes("rms_norm bf16 64x7168 (latency)", ms, 2.0 * 64 * 7168 * 2);
}

// Decode over contiguous block tables of equal-length sequences, K/V filled on the device
// (FP8 caches: every code 1.25, the time does not depend on the values).
void bench_decode(const std::string& name, int64_t seqs, int64_t seq_len, int64_t heads,
                  int64_t kv_heads, int64_t dqk, int64_t dv, int64_t block_size, bool shared,
                  bool fp8 = false) {
  const int64_t blocks_per_seq = (seq_len + block_size - 1) / block_size;
  const int64_t num_blocks = seqs * blocks_per_seq;
  auto cache = [&](int64_t d, uint64_t seed) {
    if (!fp8) return random_device({num_blocks, block_size, kv_heads, d}, DType::kBF16, seed);
    Tensor c = device_empty({num_blocks, block_size, kv_heads, d}, DType::kF8E4M3);
    KITE_CUDA_CHECK(cudaMemset(c.raw(), 0x3A, c.size_bytes()));
    return c;
  };
  Tensor k = cache(dqk, 10);
  Tensor v = shared ? k : cache(dv, 11);
  Tensor q = random_device({seqs, heads, dqk}, DType::kBF16, 12);
  Tensor out = device_empty({seqs, heads, dv}, DType::kBF16);
  std::vector<int32_t> tables(num_blocks);
  std::iota(tables.begin(), tables.end(), 0);
  std::vector<int32_t> lens(seqs, static_cast<int32_t>(seq_len));
  PagedAttentionArgs args;
  args.block_tables =
      to_device(std::span<const int32_t>(tables), {seqs, blocks_per_seq}, test_stream());
  args.seq_lens = to_device(std::span<const int32_t>(lens), {seqs}, test_stream());
  args.block_size = block_size;
  args.scale = 1.0f / std::sqrt(static_cast<float>(dqk));
  args.max_seq_len = seq_len;
  if (fp8) args.k_scale = args.v_scale = 0.01f;
  AttentionWorkspace ws;
  const double ms =
      median_ms([&] { paged_decode_attention(q, k, v, args, ws, out, test_stream()); });
  const double kv_bytes =
      static_cast<double>(seqs) * seq_len * kv_heads * (shared ? dqk : dqk + dv) * (fp8 ? 1 : 2);
  report_bytes(name, ms, kv_bytes);
}

TEST(CudaBench, DISABLED_BenchDecodeAttention) {
  bench_decode("decode bf16 64x4096 h32/8 d128", 64, 4096, 32, 8, 128, 128, 16, false);
  bench_decode("decode bf16 1x32768 h32/8 d128", 1, 32768, 32, 8, 128, 128, 16, false);
  bench_decode("decode bf16 64x4096 h16/1 mla 576/512", 64, 4096, 16, 1, 576, 512, 64, true);
  bench_decode("decode bf16 64x4096 h128/1 mla 576/512", 64, 4096, 128, 1, 576, 512, 64, true);
  bench_decode("decode bf16 64x4096 h64/8 d64", 64, 4096, 64, 8, 64, 64, 16, false);
  bench_decode("decode fp8 64x4096 h32/8 d128", 64, 4096, 32, 8, 128, 128, 16, false, true);
  bench_decode("decode fp8 1x32768 h32/8 d128", 1, 32768, 32, 8, 128, 128, 16, false, true);
  bench_decode("decode bf16 128x1500 h32/8 d128", 128, 1500, 32, 8, 128, 128, 16, false);
  bench_decode("decode fp8 128x1500 h32/8 d128", 128, 1500, 32, 8, 128, 128, 16, false, true);
}

// `seqs` prompts of `tokens` each (no cached prefix), contiguous block tables.
void bench_prefill(int64_t seqs, int64_t tokens, int64_t heads, int64_t kv_heads, int64_t dqk,
                   int64_t dv) {
  const int64_t bs = 16;
  const int64_t blocks_per_seq = (tokens + bs - 1) / bs, blocks = seqs * blocks_per_seq;
  Tensor k = random_device({blocks, bs, kv_heads, dqk}, DType::kBF16, 20);
  Tensor v = random_device({blocks, bs, kv_heads, dv}, DType::kBF16, 21);
  Tensor q = random_device({seqs * tokens, heads, dqk}, DType::kBF16, 22);
  Tensor out = device_empty({seqs * tokens, heads, dv}, DType::kBF16);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::vector<int32_t> lens(seqs, static_cast<int32_t>(tokens)), starts;
  for (int64_t s = 0; s <= seqs; ++s) starts.push_back(static_cast<int32_t>(s * tokens));
  PagedAttentionArgs args;
  args.block_tables =
      to_device(std::span<const int32_t>(table), {seqs, blocks_per_seq}, test_stream());
  args.seq_lens = to_device(std::span<const int32_t>(lens), {seqs}, test_stream());
  args.query_start = to_device(std::span<const int32_t>(starts), {seqs + 1}, test_stream());
  args.block_size = bs;
  args.scale = 1.0f / std::sqrt(static_cast<float>(dqk));
  args.max_query_len = tokens;
  args.max_seq_len = tokens;
  const double ms =
      median_ms([&] { paged_prefill_attention(q, k, v, args, out, test_stream()); }, 2, 10);
  // Causal: T(T+1)/2 scores per head, 2*dqk flops each for QK^T and 2*dv for PV.
  const double scores = static_cast<double>(tokens) * (tokens + 1) / 2;
  const std::string name = "prefill bf16 " + std::to_string(seqs) + "x" + std::to_string(tokens) +
                           " h" + std::to_string(heads) + "/" + std::to_string(kv_heads) + " d" +
                           std::to_string(dqk) + "/" + std::to_string(dv) + " causal";
  report_flops(name, ms, 2.0 * (dqk + dv) * heads * scores * seqs);
}

TEST(CudaBench, DISABLED_BenchPrefillAttention) {
  bench_prefill(1, 512, 32, 8, 128, 128);
  bench_prefill(1, 2048, 32, 8, 128, 128);
  bench_prefill(4, 2048, 32, 8, 128, 128);
  bench_prefill(1, 8192, 32, 8, 128, 128);
  bench_prefill(4, 2048, 32, 8, 64, 64);
  bench_prefill(2, 2048, 16, 16, 192, 128);
}

TEST(CudaBench, DISABLED_BenchLinear) {
  BlasLtContext ctx;
  for (int64_t m : {8192, 16, 1}) {
    const int64_t n = 8192, k = 8192;
    Tensor x = random_device({m, k}, DType::kBF16, 30);
    Tensor w = random_device({n, k}, DType::kBF16, 31, -0.05f, 0.05f);
    Tensor y = device_empty({m, n}, DType::kBF16);
    const double ms = median_ms([&] { linear(ctx, x, w, nullptr, y, test_stream()); });
    const std::string name = "linear bf16 " + std::to_string(m) + "x8192x8192";
    if (m >= 1024) {
      report_flops(name, ms, 2.0 * m * n * k);
    } else {
      report_bytes(name + " (weights)", ms, 2.0 * n * k);
    }
  }
  // Llama-3-8B's prefill linears at 512 and 2,048 tokens, each call on its own weight copy (out
  // of L2, as in a model step). The op timer read a 512-token prefill's o_proj at 53-74 us; alone
  // it takes ~31 us, and the model's trace shows ~25 (BENCHMARKS.md runs 25 and 37).
  struct Prefill {
    const char* name;
    int64_t n, k;
  };
  const Prefill shapes[] = {
      {"q/k/v", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  for (int64_t m : {512, 2048})
    for (const Prefill& s : shapes) {
      const std::vector<Tensor> ws = weight_copies(s.n, s.k, 40);
      Tensor x = random_device({m, s.k}, DType::kBF16, 32);
      Tensor y = device_empty({m, s.n}, DType::kBF16);
      size_t i = 0;
      const double ms =
          median_ms([&] { linear(ctx, x, ws[i++ % ws.size()], nullptr, y, test_stream()); });
      report_flops("linear bf16 " + std::string(s.name) + " " + std::to_string(m) + "x" +
                       std::to_string(s.n) + "x" + std::to_string(s.k),
                   ms, 2.0 * m * s.n * s.k);
    }
}

// The decode GEMV kernels side by side on the Llama-3-8B decode shapes (and 8192²), M = 1 and
// 8. Each timed call reads a different copy of W (copies rotate through >= 512 MB), so no run
// finds its weights in L2, as in a model step. The last column is each kernel's largest
// relative difference from the warp-per-row kernel's output.
TEST(CudaBench, DISABLED_BenchGemvKernels) {
  struct Shape { const char* name; int64_t n, k; };
  const Shape shapes[] = {{"gate_up 28672x4096", 28672, 4096}, {"down 4096x14336", 4096, 14336},
                          {"qkv 6144x4096", 6144, 4096},        {"o 4096x4096", 4096, 4096},
                          {"lm_head 128256x4096", 128256, 4096}, {"8192x8192", 8192, 8192}};
  const std::pair<GemvKernel, const char*> kernels[] = {{GemvKernel::kWarpPerRow, "warp"},
                                                         {GemvKernel::kBulk, "bulk"}};
  const GemvKernel saved = gemv_kernel();
  for (const Shape& sh : shapes) {
    const double bytes = 2.0 * sh.n * sh.k;
    const std::vector<Tensor> ws = weight_copies(sh.n, sh.k, 40);
    const int copies = static_cast<int>(ws.size());
    for (int64_t m : {1, 2, 8}) {
      Tensor x = random_device({m, sh.k}, DType::kBF16, 39);
      Tensor y = device_empty({m, sh.n}, DType::kBF16);
      Tensor ref;
      for (const auto& [kernel, label] : kernels) {
        set_gemv_kernel(kernel);
        int next = 0;
        const double ms = median_ms([&] {
          gemv(x, ws[next], nullptr, y, m, test_stream());
          next = (next + 1) % copies;
        });
        gemv(x, ws[0], nullptr, y, m, test_stream());
        const Tensor got = download(y);
        if (kernel == GemvKernel::kWarpPerRow) ref = got;
        const double diff = rel_error(got, ref);
        report_bytes(std::string("gemv ") + label + " M" + std::to_string(m) + " " + sh.name, ms,
                     bytes);
        std::printf("      (vs warp kernel: %.2e)\n", diff);
      }
      if (sh.n == 28672) {  // the MLP input: gate_up GEMV + silu_mul, or both in one kernel
        Tensor act = device_empty({m, sh.n / 2}, DType::kBF16);
        for (bool fused : {false, true}) {
          set_gemv_kernel(fused ? GemvKernel::kBulk : GemvKernel::kAuto);
          int next = 0;
          const double ms = median_ms([&] {
            if (fused) {
              gemv_silu_mul(x, ws[next], act, m, test_stream());
            } else {
              gemv(x, ws[next], nullptr, y, m, test_stream());
              silu_mul(y, act, test_stream());
            }
            next = (next + 1) % copies;
          });
          report_bytes(std::string(fused ? "gemv_silu_mul fused" : "gemv + silu_mul") + " M" +
                           std::to_string(m) + " " + sh.name,
                       ms, bytes);
        }
      }
    }
  }
  set_gemv_kernel(saved);
}

// The bulk decode GEMV as a decode step runs it: 64 calls back to back (PDL), per-call time,
// each call on other weights (≥ 512 MB in turn). Compare with the ring stand-in of
// launch_gap_bench.cu, which streams the same bytes without the GEMV's arithmetic.
TEST(CudaBench, DISABLED_BenchGemvBackToBack) {
  struct Shape {
    const char* name;
    int64_t n, k;
    bool gated;
  };
  const Shape shapes[] = {{"o 4096x4096", 4096, 4096, false},
                          {"qkv 6144x4096", 6144, 4096, false},
                          {"down 4096x14336", 4096, 14336, false},
                          {"gate_up+silu 28672x4096", 28672, 4096, true}};
  const GemvKernel saved = gemv_kernel();
  set_gemv_kernel(GemvKernel::kBulk);
  for (const Shape& sh : shapes) {
    const std::vector<Tensor> ws = weight_copies(sh.n, sh.k, 70);
    const size_t copies = ws.size();
    Tensor x = random_device({1, sh.k}, DType::kBF16, 69);
    Tensor y = device_empty({1, sh.gated ? sh.n / 2 : sh.n}, DType::kBF16);
    auto call = [&](int i) {
      if (sh.gated)
        gemv_silu_mul(x, ws[i % copies], y, 1, test_stream());
      else
        gemv(x, ws[i % copies], nullptr, y, 1, test_stream());
    };
    report_bytes(std::string("gemv back to back M1 ") + sh.name, per_call_ms(call),
                 2.0 * sh.n * sh.k);
  }
  set_gemv_kernel(saved);
}

TEST(CudaBench, DISABLED_BenchSamplingAndRouting) {
  Tensor logits = random_device({64, 151936}, DType::kBF16, 40, -10.0f, 10.0f);
  Tensor ids = device_empty({64}, DType::kI32);
  double ms = median_ms([&] { greedy_sample(logits, ids, test_stream()); });
  report_bytes("greedy bf16 64x151936", ms, 64.0 * 151936 * 2);
  Tensor router = random_device({4096, 256}, DType::kF32, 41, -4.0f, 4.0f);
  Tensor bias = random_device({256}, DType::kF32, 42, 0.0f, 0.1f);
  Tensor eids = device_empty({4096, 8}, DType::kI32);
  Tensor ew = device_empty({4096, 8}, DType::kF32);
  ops::MoeRoutingParams p{
      ops::MoeScoring::kSigmoid, ops::MoeTopkMethod::kNoauxTc, 8, 8, 4, true, 2.5f, &bias};
  ms = median_ms([&] { moe_route(router, p, eids, ew, test_stream()); });
  report_bytes("moe_route v3 4096x256 (logits)", ms, 4096.0 * 256 * 4);
}

// DeepSeek-V2-Lite's routed experts at prefill: 4096 tokens, top 6 of 64, gate_up 2816 x 2048.
TEST(CudaBench, DISABLED_BenchMoeDispatch) {
  const int64_t tokens = 4096, top_k = 6, experts = 64, n = 2816, k = 2048;
  const int64_t pairs = tokens * top_k;
  Tensor router = random_device({tokens, experts}, DType::kF32, 50, -4.0f, 4.0f);
  Tensor ids = device_empty({tokens, top_k}, DType::kI32);
  Tensor weights = device_empty({tokens, top_k}, DType::kF32);
  ops::MoeRoutingParams rp{
      ops::MoeScoring::kSoftmax, ops::MoeTopkMethod::kGreedy, 6, 1, 1, false, 1.0f, nullptr};
  moe_route(router, rp, ids, weights, test_stream());
  Tensor x = random_device({tokens, k}, DType::kBF16, 51);
  Tensor w = random_device({experts, n, k}, DType::kBF16, 52, -0.05f, 0.05f);
  Tensor xp = device_empty({pairs, k}, DType::kBF16);
  Tensor yp = device_empty({pairs, n}, DType::kBF16);
  Tensor out = device_empty({tokens, n}, DType::kBF16);
  MoePermutation perm;
  double ms = median_ms([&] { moe_permute(ids, experts, perm, test_stream()); });
  report_bytes("moe_permute 4096x6 of 64 (ids)", ms, pairs * 4.0);
  ms = median_ms([&] { moe_gather(x, perm, xp, test_stream()); });
  report_bytes("moe_gather bf16 24576x2048", ms, 2.0 * pairs * k * 2);
  ms = median_ms([&] { moe_grouped_linear(xp, w, perm, yp, test_stream()); });
  report_flops("moe_grouped_linear (device) 24576x2816x2048", ms, 2.0 * pairs * n * k);
  Tensor off_host = to_host(perm.offsets, test_stream());
  const std::span<const int32_t> offsets(off_host.data<int32_t>(), experts + 1);
  BlasLtContext ctx;
  ms = median_ms([&] { moe_grouped_linear_host(ctx, xp, w, offsets, yp, test_stream()); });
  report_flops("moe_grouped_linear_host (cuBLASLt loop)", ms, 2.0 * pairs * n * k);
  ms = median_ms([&] { moe_combine(yp, weights, perm, out, test_stream()); });
  report_bytes("moe_combine bf16 4096x6x2816", ms, (pairs + tokens) * n * 2.0);
}

// The decode-size MoE launches (moe_decode_bulk.cu) at DeepSeek-V2-Lite's shape, batch 1: the
// time per call over 64 calls in a row, with one layer's weights read every time (pages warm)
// and cycling over 8 layers' (9 GB: each call on pages last touched 8 calls before, as a
// decode step reads them). Against the bytes each call must read (6 routed + 2 shared experts).
TEST(CudaBench, DISABLED_BenchMoeDecode) {
  const int64_t experts = 64, inter = 1408, d = 2048, shared = 2816, top_k = 6, layers = 8;
  std::vector<MoeDecodeWeights> w;
  for (int64_t l = 0; l < layers; ++l)
    w.push_back({random_device({experts, 2 * inter, d}, DType::kBF16, 60 + 4 * l, -0.05f, 0.05f),
                 random_device({experts, d, inter}, DType::kBF16, 61 + 4 * l, -0.05f, 0.05f),
                 random_device({2 * shared, d}, DType::kBF16, 62 + 4 * l, -0.05f, 0.05f),
                 random_device({d, shared}, DType::kBF16, 63 + 4 * l, -0.05f, 0.05f)});
  Tensor x = random_device({1, d}, DType::kBF16, 90);
  const std::vector<int32_t> id_host = {3, 17, 29, 40, 51, 62};
  Tensor ids = to_device(std::span<const int32_t>(id_host), {1, top_k}, test_stream());
  Tensor weights = random_device({1, top_k}, DType::kF32, 91, 0.1f, 0.3f);
  Tensor act = device_empty({moe_decode_act_elems(1, top_k, inter, shared)}, DType::kBF16);
  Tensor out = device_empty({1, d}, DType::kBF16);
  const double gate_up_bytes = (top_k * 2 * inter + 2 * shared) * d * 2.0;
  const double down_bytes = (top_k * inter + shared) * d * 2.0;
  cudaStream_t s = test_stream();
  for (int64_t cycle : {int64_t{1}, layers}) {
    const std::string tag = cycle == 1 ? " (one layer)" : " (8 layers)";
    double ms = per_call_ms([&](int i) { moe_decode_gate_up(x, ids, w[i % cycle], act, s); });
    report_bytes("moe_decode gate_up 1x(6+2)x2816x2048" + tag, ms, gate_up_bytes);
    ms = per_call_ms([&](int i) { moe_decode_down(ids, weights, w[i % cycle], act, out, s); });
    report_bytes("moe_decode down 1x(6+2)x2048x1408" + tag, ms, down_bytes);
    ms = per_call_ms([&](int i) {
      moe_decode_gate_up(x, ids, w[i % cycle], act, s);
      moe_decode_down(ids, weights, w[i % cycle], act, out, s);
    });
    report_bytes("moe_decode both" + tag, ms, gate_up_bytes + down_bytes);
    ms = per_call_ms([&](int i) {
      moe_decode(x, ids, weights, w[i % cycle], act, out, s, MoeDecodeLaunches::kOne);
    });
    report_bytes("moe_decode one launch" + tag, ms, gate_up_bytes + down_bytes);
  }
}

// 64 rows of Qwen's 151936-token vocabulary: temperature 0.7, top-k 50, top-p 0.9, min-p
// 0.05, the three penalties over 100 history ids per row.
TEST(CudaBench, DISABLED_BenchSamplingGpu) {
  const int64_t rows = 64, vocab = 151936;
  Tensor logits = random_device({rows, vocab}, DType::kBF16, 60, -10.0f, 10.0f);
  auto fill_f32 = [&](float v) {
    std::vector<float> values(rows, v);
    return to_device(Tensor::from_vector(values, {rows}), DType::kF32, test_stream());
  };
  std::vector<int32_t> top_k(rows, 50), offsets, ids;
  std::vector<int64_t> seeds(rows, 7), steps(rows, 3);
  for (int64_t r = 0; r <= rows; ++r) offsets.push_back(static_cast<int32_t>(r * 100));
  for (int64_t i = 0; i < rows * 100; ++i) ids.push_back(static_cast<int32_t>((i * 7919) % vocab));
  GpuSamplingParams p{fill_f32(0.7f),
                      to_device(std::span<const int32_t>(top_k), {rows}, test_stream()),
                      fill_f32(0.9f),
                      fill_f32(0.05f),
                      fill_f32(1.1f),
                      fill_f32(0.2f),
                      fill_f32(0.3f),
                      to_device(std::span<const int64_t>(seeds), {rows}, test_stream()),
                      to_device(std::span<const int64_t>(steps), {rows}, test_stream())};
  Tensor d_ids = to_device(std::span<const int32_t>(ids), {rows * 100}, test_stream());
  Tensor d_off = to_device(std::span<const int32_t>(offsets), {rows + 1}, test_stream());
  GpuTokenHistory history{d_ids, d_off, d_ids, d_off};
  SamplingWorkspace ws;
  Tensor filtered = device_empty({rows, vocab}, DType::kF32);
  Tensor out = device_empty({rows}, DType::kI32);
  double ms = median_ms([&] { sampling_filter(logits, p, &history, ws, filtered, test_stream()); });
  report_bytes("sampling_filter 64x151936 (k50 p0.9 min_p pen.)", ms, rows * vocab * 6.0);
  ms = median_ms([&] { sampling_draw(filtered, p, out, test_stream()); });
  report_bytes("sampling_draw 64x151936", ms, rows * vocab * 4.0);
}

TEST(CudaFill, UniformIsInRangeAndVaried) {
  Tensor t = device_empty({1 << 16}, DType::kF32);
  fill_uniform(t, -2.0f, 3.0f, 7, test_stream());
  Tensor h = download(t);
  double sum = 0.0;
  float lo = 1e9f, hi = -1e9f;
  for (float v : h.f32()) {
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -2.0f);
  EXPECT_LT(hi, 3.0f);
  EXPECT_LT(lo, -1.9f);
  EXPECT_GT(hi, 2.9f);
  EXPECT_NEAR(sum / h.numel(), 0.5, 0.05);
}

}  // namespace
}  // namespace kite::cuda
