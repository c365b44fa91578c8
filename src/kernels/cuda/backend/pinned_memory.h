// Pinned (page-locked) host memory for the CUDA backend's copies: asynchronous, without the
// page faults of a pageable copy into a fresh host tensor every step.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {

// One pinned host allocation, freed with its last owner.
struct PinnedBlock {
  explicit PinnedBlock(size_t bytes) : size(bytes) {
    KITE_CUDA_CHECK(cudaMallocHost(&data, bytes));
  }
  ~PinnedBlock() { cudaFreeHost(data); }
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
  void* data = nullptr;
  size_t size = 0;
};

// Pinned host memory grown on demand (the per-step metadata upload, the sampled ids).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (data_) cudaFreeHost(data_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  char* reserve(size_t bytes) {
    if (bytes > size_) {
      if (data_) KITE_CUDA_CHECK(cudaFreeHost(data_));
      data_ = nullptr;
      KITE_CUDA_CHECK(cudaMallocHost(&data_, bytes));
      size_ = bytes;
    }
    return static_cast<char*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kite::cuda
