// Paged attention over an FP8 E4M3 KV cache (--kv-cache-dtype fp8), CPU reference.
#pragma once

#include "kernels/ops.h"

namespace kite::ops::cpu {

// Decodes the blocks the batch's block tables use (fp8 * k_scale / v_scale) into a compact
// fp32 cache, renumbers the tables, and runs the fp32 paged_attention on it. The decoded
// values are exactly what a GPU kernel reading the FP8 cache computes with, so this is the
// reference for it; the cost is one pass over the used blocks per call.
void paged_attention_fp8(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         const PagedAttentionParams& params, Tensor& out);

}  // namespace kite::ops::cpu
