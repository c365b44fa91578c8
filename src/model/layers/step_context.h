// StepContext: what every layer of one forward step shares, computed once per step by the
// model: the batch, the rotary cos/sin of each token, and the paged-attention geometry.
#pragma once

#include "core/tensor.h"
#include "kernels/ops.h"
#include "model/forward_batch.h"

namespace kite {

struct StepContext {
  const ForwardBatch* batch = nullptr;
  Tensor cos;  // [num_tokens, rot_dim/2]
  Tensor sin;
  ops::PagedAttentionParams attention;  // spans point into *batch
};

}  // namespace kite
