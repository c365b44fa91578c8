// Dummy weights: tensors invented from a name and a shape, for `--load-format dummy`.
//
// Deterministic in (seed, name): element i of tensor `name` is a counter-based hash of
// (seed ^ hash(name), i), so a tensor does not depend on the order tensors are asked for and
// can be filled in parallel. Scales keep activations O(1) through a deep stack:
//   *norm.weight (RMSNorm gains)        1 + U(-0.05, 0.05)
//   *.bias, 1-D others (router biases)  U(-0.02, 0.02)
//   2-D [out, in] (linears, embeddings) U(-a, a) with a = sqrt(3 / in): std 1/sqrt(fan_in)
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace kite {

Tensor make_dummy_tensor(const std::string& name, const Shape& shape, uint64_t seed);

}  // namespace kite
