// Launching a kernel with programmatic dependent launch (Hopper): the kernel may start while
// the previous kernel on the stream is still running (it must call pdl_wait(), common.cuh,
// before reading anything that kernel writes). KITE_CUDA_NO_PDL=1 turns it off (an A/B switch:
// plain stream order).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {

// The small decode-path kernels (norms, rope + cache write, decode attention and its combine)
// call pdl_wait first and may be launched this way too, but are not by default: on the H200 the
// Llama-3-8B batch-1 step took 4.51–4.54 ms with them early-launched against 4.38–4.40 ms with
// the GEMVs alone (and 4.60 ms with none; one call, BENCHMARKS.md run 5) — plausibly because
// early blocks waiting on an SM hold resources the next GEMV's persistent blocks need.
// KITE_CUDA_PDL_ALL=1 launches them early too (an A/B switch).
inline bool pdl_for_small_kernels() {
  static const bool on = std::getenv("KITE_CUDA_PDL_ALL") != nullptr;
  return on;
}

// launch_pdl when `early`, else a plain launch on the stream.
template <typename... Params, typename... Args>
void launch_pdl_if(bool early, void (*kernel)(Params...), dim3 grid, int threads, size_t smem_bytes,
                   cudaStream_t stream, Args... args) {
  static const bool off = std::getenv("KITE_CUDA_NO_PDL") != nullptr;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = off || !early ? 0 : 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  KITE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, int threads, size_t smem_bytes,
                cudaStream_t stream, Args... args) {
  launch_pdl_if(true, kernel, grid, threads, smem_bytes, stream, args...);
}

}  // namespace kite::cuda
