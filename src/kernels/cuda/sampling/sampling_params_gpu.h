// Sampling beyond greedy on the GPU: per-row penalties, temperature, top-k, top-p, min-p and a
// seeded Philox draw, the pipeline of kite::Sampler (sampling/sampler.h) for device rows:
//
//   penalties (repetition over prompt + output, frequency/presence over output, vLLM order)
//   -> temperature 0: only the argmax survives (ties: lowest id)
//   -> else z = (l - max) / T, then top_k -> top_p -> min_p (Hugging Face's warper order)
//
// sampling_filter writes, per row, z for the surviving tokens and -inf for the others, so a
// caller (or a test) sees exactly which tokens may be drawn; sampling_draw draws one token per
// row from softmax(filtered). Ties follow the CPU sampler (higher logit first, then lower id).
// The draw's random stream is Philox4x32-10 keyed by (seed[r], offset[r]): the same pair gives
// the same token; the runner advances offset each step. It is not the CPU sampler's mt19937
// stream, so GPU and CPU draw the same distribution, not the same tokens.
#pragma once

#include <cuda_runtime.h>

#include "core/tensor.h"
#include "kernels/cuda/device_buffer.h"

namespace kite::cuda {

// One entry per row, device tensors of R values. Off values: top_k <= 0 or >= vocab,
// top_p >= 1, min_p <= 0, repetition 1, frequency 0, presence 0; temperature 0 is greedy.
struct GpuSamplingParams {
  Tensor temperature;         // F32 [R]
  Tensor top_k;               // I32 [R]
  Tensor top_p;               // F32 [R]
  Tensor min_p;               // F32 [R]
  Tensor repetition_penalty;  // F32 [R]
  Tensor frequency_penalty;   // F32 [R]
  Tensor presence_penalty;    // F32 [R]
  Tensor seed;                // I64 [R]: Philox key
  Tensor offset;              // I64 [R]: Philox counter (advance it every step)
};

// Token histories in CSR form: row r's prompt ids are prompt_ids[prompt_offsets[r] ..
// prompt_offsets[r + 1]), likewise for the output. All I32; ids outside [0, vocab) are ignored.
struct GpuTokenHistory {
  Tensor prompt_ids, prompt_offsets;  // [Np], [R + 1]
  Tensor output_ids, output_offsets;  // [No], [R + 1]
};

// Per-row integer counters for the penalties, [R, vocab], kept all-zero between calls (each
// call resets the entries it touched), grown on demand (growing waits for the device).
class SamplingWorkspace {
 public:
  int32_t* counters(int64_t rows, int64_t vocab, cudaStream_t stream);

 private:
  DeviceBuffer counts_;
};

// logits F32 or BF16 [R, vocab] (not modified) -> filtered F32 [R, vocab]. history may be null
// (no penalties). A row whose logits are all NaN or -inf keeps token 0 only.
void sampling_filter(const Tensor& logits, const GpuSamplingParams& params,
                     const GpuTokenHistory* history, SamplingWorkspace& workspace, Tensor& filtered,
                     cudaStream_t stream);

// token_ids I32 [R]: a draw from softmax(filtered[r]) (filtered as sampling_filter writes it)
// with Philox(seed[r], offset[r]); the ids are scanned in order, so the draw is deterministic.
void sampling_draw(const Tensor& filtered, const GpuSamplingParams& params, Tensor& token_ids,
                   cudaStream_t stream);

}  // namespace kite::cuda
