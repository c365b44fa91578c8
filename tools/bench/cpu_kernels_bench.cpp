// Micro-benchmark of the CPU kernels whose speed matters most (not a test: numbers go to
// docs/BENCHMARKS.md by hand). Reports the best of several repetitions, since the machine is
// shared. Build (after the main build):
//   g++ -O2 -mavx2 -mfma -fopenmp -std=c++20 -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -Isrc \
//       tools/bench/cpu_kernels_bench.cpp build/libkite_lib.a -lopenblas -lspdlog -lfmt \
//       -o build/cpu_kernels_bench
//   OMP_NUM_THREADS=2 build/cpu_kernels_bench
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace {

using kite::Tensor;

Tensor random_tensor(const kite::Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(shape);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& v : t.f32()) v = d(rng);
  return t;
}

// Best wall time of `reps` runs (after a warm-up), in seconds.
double best_seconds(int reps, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void bench_linear(int64_t m, int64_t k, int64_t n) {
  std::mt19937 rng(1);
  Tensor x = random_tensor({m, k}, rng), w = random_tensor({n, k}, rng);
  Tensor y = Tensor::empty({m, n});
  const double s = best_seconds(200, [&] { kite::ops::linear(x, w, nullptr, y); });
  std::printf("linear M=%ld K=%ld N=%ld: %.1f us, %.2f GFLOP/s\n", long(m), long(k), long(n),
              s * 1e6, 2.0 * m * n * k / s / 1e9);
}

void bench_attention(int64_t seq_len, int64_t heads, int64_t kv_heads, int64_t dim) {
  std::mt19937 rng(2);
  const int64_t block_size = 16, blocks = (seq_len + block_size - 1) / block_size;
  Tensor q = random_tensor({1, heads, dim}, rng);
  Tensor k = random_tensor({blocks, block_size, kv_heads, dim}, rng);
  Tensor v = random_tensor({blocks, block_size, kv_heads, dim}, rng);
  Tensor out = Tensor::empty({1, heads, dim});
  std::vector<std::vector<int32_t>> tables(1);
  for (int64_t b = 0; b < blocks; ++b) tables[0].push_back(static_cast<int32_t>(b));
  std::vector<int32_t> query_start = {0, 1}, seq_lens = {static_cast<int32_t>(seq_len)};
  kite::ops::PagedAttentionParams p;
  p.query_start = query_start;
  p.seq_lens = seq_lens;
  p.block_tables = &tables;
  p.block_size = block_size;
  p.scale = 1.0f / std::sqrt(float(dim));
  const double s = best_seconds(200, [&] { kite::ops::paged_attention(q, k, v, p, out); });
  std::printf("paged_attention 1 query x %ld keys, %ld heads (%ld kv), dim %ld: %.1f us\n",
              long(seq_len), long(heads), long(kv_heads), long(dim), s * 1e6);
}

}  // namespace

int main() {
  bench_linear(1, 1024, 1024);
  bench_linear(64, 1024, 1024);
  bench_attention(2048, 8, 8, 64);
  bench_attention(2048, 32, 8, 128);
  return 0;
}
