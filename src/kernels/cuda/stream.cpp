#include "kernels/cuda/stream.h"

#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {

Stream::Stream() { KITE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const { KITE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

const cudaDeviceProp& device_properties() {
  static std::mutex mutex;
  static std::vector<cudaDeviceProp> props;
  static std::vector<bool> loaded;
  int device = 0;
  KITE_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (props.empty()) {
    int count = 0;
    KITE_CUDA_CHECK(cudaGetDeviceCount(&count));
    props.resize(count);
    loaded.assign(count, false);
  }
  if (!loaded.at(device)) {
    KITE_CUDA_CHECK(cudaGetDeviceProperties(&props[device], device));
    loaded[device] = true;
  }
  return props[device];
}

}  // namespace kite::cuda
