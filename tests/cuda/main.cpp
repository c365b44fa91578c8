// Test entry point: prints the device once, so a log shows what the numbers came from.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "cuda_test_util.h"

namespace kite::cuda::testing {
uint32_t run_seed() {
  static const uint32_t seed = [] {
    const char* env = std::getenv("KITE_CUDA_TEST_SEED");
    return env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : std::random_device{}();
  }();
  return seed;
}
}  // namespace kite::cuda::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();  // listing needs no device
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "kite_cuda_tests: no CUDA device visible; these tests need a GPU\n");
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("device: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB; runtime %d, driver %d\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              prop.totalGlobalMem / 1073741824.0, prop.l2CacheSize >> 20, runtime, driver);
  std::printf("seed: KITE_CUDA_TEST_SEED=%u\n", kite::cuda::testing::run_seed());
  return RUN_ALL_TESTS();
}
