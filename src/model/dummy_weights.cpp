#include "model/dummy_weights.h"

#include <xxhash.h>

#include <cmath>

namespace kite {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1) from the top 24 bits (exactly representable in fp32).
float unit_uniform(uint64_t bits) {
  return static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Tensor make_dummy_tensor(const std::string& name, const Shape& shape, uint64_t seed) {
  float offset = 0.0f, scale = 0.02f;
  if (ends_with(name, "norm.weight")) {
    offset = 1.0f;
    scale = 0.05f;
  } else if (shape.size() == 2 && !ends_with(name, ".bias")) {
    scale = std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(shape[1], 1)));
  }
  const uint64_t key = seed ^ XXH64(name.data(), name.size(), 0x6b697465ull);
  Tensor t = Tensor::empty(shape, DType::kF32);
  float* out = t.data<float>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    out[i] =
        offset +
        scale * unit_uniform(splitmix64(key + static_cast<uint64_t>(i) * 0x2545F4914F6CDD1Dull));
  return t;
}

}  // namespace kite
