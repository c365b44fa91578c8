// A CUDA stream owned by RAII, and the current device's properties.
#pragma once

#include <cuda_runtime.h>

namespace kite::cuda {

// A non-blocking stream (it does not synchronise with the legacy default stream). Move-only.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT: pass where a stream is wanted
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// Properties of the current device, read once per device and cached.
const cudaDeviceProp& device_properties();

}  // namespace kite::cuda
