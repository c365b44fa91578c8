// The HBM read roofline the decode figures are held to (issue 6: "bytes read per token ÷
// measured read bandwidth"), measured on the machine that runs the benchmarks:
//   ./build-cuda/kite_cuda_tests --gtest_also_run_disabled_tests \
//       --gtest_filter='CudaBench.DISABLED_BenchReadBandwidth'
// A streaming read of 1 and 8 GiB with 16-byte loads, four in flight per thread, summed into
// one value per block (written, so the loads cannot be dropped); median of 10 timed runs.
// Also prints the batch-1 decode floor of the Llama-3-8B shape (15.01 GB of BF16 weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kite::cuda {
namespace {

using namespace testing;

__global__ void read_kernel(const uint4* __restrict__ p, int64_t n, float* __restrict__ out) {
  float acc = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += __uint_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
  }
  if (acc == 12345.678f) out[blockIdx.x] = acc;  // practically never: keeps the loads
}

TEST(CudaBench, DISABLED_BenchReadBandwidth) {
  int sms = 0;
  KITE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Tensor out = device_empty({4096}, DType::kF32);
  for (int64_t gib : {1, 8}) {
    const int64_t bytes = gib << 30;
    Tensor buf = device_empty({bytes / 4}, DType::kF32);
    fill_uniform(buf, -1.0f, 1.0f, 7, test_stream());
    const int64_t n = bytes / 16;
    std::vector<float> times;
    cudaEvent_t a, b;
    KITE_CUDA_CHECK(cudaEventCreate(&a));
    KITE_CUDA_CHECK(cudaEventCreate(&b));
    for (int rep = 0; rep < 13; ++rep) {
      KITE_CUDA_CHECK(cudaEventRecord(a, test_stream()));
      read_kernel<<<sms * 4, 512, 0, test_stream()>>>(static_cast<const uint4*>(buf.raw()), n,
                                                       static_cast<float*>(out.raw()));
      KITE_CUDA_CHECK_LAUNCH();
      KITE_CUDA_CHECK(cudaEventRecord(b, test_stream()));
      KITE_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      KITE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      if (rep >= 3) times.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(times.begin(), times.end());
    const double ms = times[times.size() / 2], gbs = bytes / (ms * 1e6);
    std::printf("BENCH %-44s %10.1f us %9.1f GB/s read\n",
                ("read bandwidth " + std::to_string(gib) + " GiB").c_str(), ms * 1e3, gbs);
    if (gib == 8)
      std::printf("BENCH llama-3-8b decode floor (15.01 GB)        %10.3f ms at %.0f GB/s; 75%% "
                  "of it: %.3f ms\n",
                  15.01e9 / (gbs * 1e6), gbs, 15.01e9 / (gbs * 1e6) / 0.75);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace kite::cuda
