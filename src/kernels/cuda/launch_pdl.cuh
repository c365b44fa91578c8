// Launching a kernel with programmatic dependent launch (Hopper): the kernel may start while
// the previous kernel on the stream is still running (it must call pdl_wait(), common.cuh,
// before reading anything that kernel writes). KITE_CUDA_NO_PDL=1 turns it off (an A/B switch:
// plain stream order).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/env_switch.h"

namespace kite::cuda {

// The small decode-path kernels (norms, rope + cache write, decode attention and its combine)
// are launched early too: each waits (pdl_wait) before anything else and only then lets the
// kernel after it launch (pdl_trigger). With the trigger before the wait, as these kernels had
// it first, an early small kernel let the next GEMV launch while the one before was still
// running, and the Llama-3-8B step lost 5-6 % (4.48-4.50 ms against 4.25 at batch 1; runs 5
// and 16 of BENCHMARKS.md); with the wait first, batch 1 gained ~1 % on both models in run 16
// (Llama-3-8B 4.155 / 4.183 / 4.209 against 4.191 / 4.218 / 4.235 ms, DeepSeek-V2-Lite 2.218 /
// 2.253 / 2.230 against 2.256 / 2.256 / 2.289; batch 2-8 within 0.6 %). KITE_CUDA_PDL_ALL=0
// launches them plainly (an A/B switch).
inline bool pdl_for_small_kernels() {
  static const bool on = !env_switched_off("KITE_CUDA_PDL_ALL");
  return on;
}

// launch_pdl when `early`, else a plain launch on the stream; with `cluster` other than
// (1, 1, 1) the blocks run in thread-block clusters of those dims (the grid a multiple of them).
template <typename... Params, typename... Args>
void launch_pdl_clustered_if(bool early, dim3 cluster, void (*kernel)(Params...), dim3 grid,
                             int threads, size_t smem_bytes, cudaStream_t stream, Args... args) {
  static const bool off = std::getenv("KITE_CUDA_NO_PDL") != nullptr;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attrs[2]{};
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = off || !early ? 0 : 1;
  config.attrs = attrs;
  config.numAttrs = 1;
  if (cluster.x * cluster.y * cluster.z > 1) {
    attrs[1].id = cudaLaunchAttributeClusterDimension;
    attrs[1].val.clusterDim.x = cluster.x;
    attrs[1].val.clusterDim.y = cluster.y;
    attrs[1].val.clusterDim.z = cluster.z;
    config.numAttrs = 2;
  }
  KITE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

template <typename... Params, typename... Args>
void launch_pdl_if(bool early, void (*kernel)(Params...), dim3 grid, int threads, size_t smem_bytes,
                   cudaStream_t stream, Args... args) {
  launch_pdl_clustered_if(early, dim3(1, 1, 1), kernel, grid, threads, smem_bytes, stream, args...);
}

template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, int threads, size_t smem_bytes,
                cudaStream_t stream, Args... args) {
  launch_pdl_if(true, kernel, grid, threads, smem_bytes, stream, args...);
}

}  // namespace kite::cuda
