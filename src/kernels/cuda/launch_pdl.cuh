// Launching a kernel with programmatic dependent launch (Hopper): the kernel may start while
// the previous kernel on the stream is still running (it must call pdl_wait(), common.cuh,
// before reading anything that kernel writes). KITE_CUDA_NO_PDL=1 turns it off (an A/B switch:
// plain stream order).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {

template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, int threads, size_t smem_bytes,
                cudaStream_t stream, Args... args) {
  static const bool off = std::getenv("KITE_CUDA_NO_PDL") != nullptr;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = off ? 0 : 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  KITE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

}  // namespace kite::cuda
