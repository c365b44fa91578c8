// The CUDA backend (kernels/backend.h) on the current GPU: BF16 weights, activations and KV
// cache, fp32 accumulation, every op queued on one stream.
//
// Step scratch comes from a ScratchArena reset by begin_step(): all work runs in order on the
// backend's stream, so memory handed out in step n may be reused in step n+1 without waiting.
// begin_step() packs the batch's metadata (token ids, slots, cos/sin, query starts, lengths,
// padded block tables) into one pinned buffer and uploads it with one copy.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace kite::cuda {

// True when the CUDA runtime sees at least one device.
bool cuda_device_available();

// The backend on device 0 (throws CudaError when there is none).
std::shared_ptr<Backend> make_cuda_backend();

// Makes create_backend(Device::kCuda) build a CUDA backend.
void register_cuda_backend();

}  // namespace kite::cuda
