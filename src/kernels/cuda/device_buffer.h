// Device memory for the CUDA backend: an owning buffer, device tensors, and host transfers.
//
// Device tensors are ordinary kite::Tensor values with device() == Device::kCuda: contiguous,
// row-major, their bytes owned (shared) by a DeviceBuffer, so views and slices work as on the
// host. Host accessors (data<T>() dereferenced on the host, clone, to_f32) must not be used on
// them; copy with to_host / to_host_f32 first. The only float dtypes the kernels take are F32
// and BF16; index tensors (ids, slots, block tables, sequence lengths) are I32 or I64.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace kite::cuda {

// Owns one cudaMalloc allocation (or none). Move-only; freed in the destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t size_bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  // Makes the buffer at least `size_bytes` long. Growing frees the old allocation first
  // (cudaFree waits for the device), so the contents are not kept.
  void reserve(size_t size_bytes);

 private:
  void release() noexcept;
  void* data_ = nullptr;
  size_t size_bytes_ = 0;
};

// An uninitialised device tensor in its own allocation (256-byte aligned by cudaMalloc).
Tensor device_empty(const Shape& shape, DType dtype);

// Copies a host tensor to a new device tensor of `dtype`. A host F32 tensor converts to BF16
// (round to nearest even) when `dtype` is BF16; otherwise the dtypes must match. Waits for the
// copy, so `host` may be freed on return.
Tensor to_device(const Tensor& host, DType dtype, cudaStream_t stream);
Tensor to_device(std::span<const int32_t> values, const Shape& shape, cudaStream_t stream);
Tensor to_device(std::span<const int64_t> values, const Shape& shape, cudaStream_t stream);

// Copies a device tensor to a new host tensor of the same dtype (waits for the stream).
Tensor to_host(const Tensor& device, cudaStream_t stream);
// Copies a device F32 or BF16 tensor to a new host F32 tensor (waits for the stream).
Tensor to_host_f32(const Tensor& device, cudaStream_t stream);

// Sets every byte to 0xFF: NaN for F32/BF16/F16, -1 for signed integers. Tests poison outputs
// with it so an element a kernel forgot to write can never pass.
void poison(Tensor& device, cudaStream_t stream);

// Throws std::invalid_argument unless `t` is a defined device tensor of `dtype`.
void check_device(const Tensor& t, DType dtype, const char* op, const char* name);
// As above, for F32 or BF16.
void check_device_float(const Tensor& t, const char* op, const char* name);

// True when the byte ranges of two tensors overlap (used to reject illegal aliasing).
bool bytes_overlap(const Tensor& a, const Tensor& b);

}  // namespace kite::cuda
