// MoE routing on the GPU: the function of ops::moe_route (kernels/ops.h) for device tensors.
#pragma once

#include <cuda_runtime.h>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace kite::cuda {

// router_logits F32 or BF16 [T, E] (E <= 4096) -> expert_ids I32 [T, top_k] and
// expert_weights F32 [T, top_k], in descending choice order, lower expert id first on ties.
// params as for ops::moe_route; params.correction_bias, when set, is a device F32 [E] tensor.
// One warp per token up to 256 experts, else one block. A row whose logits are all NaN gets
// expert 0 with a NaN weight.
// The kernel is launched early (PDL) and waits for the logits' kernel; it lets the next launch
// start after that wait or, trigger_first, at its own start (for moe_decode's early start).
void moe_route(const Tensor& router_logits, const ops::MoeRoutingParams& params, Tensor& expert_ids,
               Tensor& expert_weights, cudaStream_t stream, bool trigger_first = false);

}  // namespace kite::cuda
