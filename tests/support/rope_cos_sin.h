// cos/sin tables of random positions, as a rope table gives them: the CPU and CUDA rope tests
// share it.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "core/tensor.h"

namespace kite::test_support {

// cos/sin [tokens, rot_dim / 2] at a random position per token (base 10000).
inline void make_cos_sin(int64_t tokens, int64_t rot_dim, std::mt19937& rng, Tensor& cos,
                         Tensor& sin) {
  const int64_t half = rot_dim / 2;
  cos = Tensor::empty({tokens, half});
  sin = Tensor::empty({tokens, half});
  std::uniform_int_distribution<int> pos(0, 8191);
  for (int64_t t = 0; t < tokens; ++t) {
    const double p = pos(rng);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / rot_dim);
      cos.data<float>()[t * half + i] = static_cast<float>(std::cos(angle));
      sin.data<float>()[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

}  // namespace kite::test_support
