// Sampling on the GPU.
#pragma once

#include <cuda_runtime.h>

#include "core/tensor.h"

namespace kite::cuda {

// token_ids[t] = argmax over logits[t, :] (F32 or BF16 [T, vocab]) into I32 [T]; ties go to the
// lowest id and NaN never wins (a row of NaN gives id 0). A cluster of 8 blocks per row (at
// most 65,535 rows). row_ok (optional, I32 [T]) gets 1 for a row the host sampler would accept
// — no NaN or +inf, not all -inf — and 0 otherwise.
void greedy_sample(const Tensor& logits, Tensor& token_ids, cudaStream_t stream,
                   Tensor* row_ok = nullptr);

}  // namespace kite::cuda
