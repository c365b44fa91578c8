// Device-side random fill: benchmarks and dummy weights (--load-format dummy) need gigabytes
// of non-zero data without generating it on the host. Counter-based (a hash of the element
// index and the seed), so the values do not depend on the launch shape.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"

namespace kite::cuda {
namespace {

// SplitMix64 finaliser: a good 64-bit mix of (seed, index).
__device__ __forceinline__ uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_uniform_kernel(T* out, int64_t n, float lo, float hi, uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const uint64_t bits = mix(seed * 0xD1B54A32D192ED03ull + static_cast<uint64_t>(i));
    const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = from_float<T>(lo + (hi - lo) * u);
  }
}

uint64_t name_hash(const std::string& s) {  // FNV-1a: dummy weights' per-tensor seed
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void fill_uniform(Tensor& t, float lo, float hi, uint64_t seed, cudaStream_t stream) {
  check_device_float(t, "fill_uniform", "t");
  const int64_t n = t.numel();
  if (n == 0) return;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 65536));
  if (t.dtype() == DType::kF32) {
    fill_uniform_kernel<float>
        <<<blocks, threads, 0, stream>>>(static_cast<float*>(t.raw()), n, lo, hi, seed);
  } else {
    fill_uniform_kernel<bf16>
        <<<blocks, threads, 0, stream>>>(static_cast<bf16*>(t.raw()), n, lo, hi, seed);
  }
  KITE_CUDA_CHECK_LAUNCH();
}

Tensor dummy_matrix(const std::string& name, const Shape& shape, cudaStream_t stream) {
  Tensor t = device_empty(shape, DType::kBF16);
  const float a = std::sqrt(3.0f / static_cast<float>(shape[1]));
  fill_uniform(t, -a, a, name_hash(name), stream);
  return t;
}

}  // namespace kite::cuda
