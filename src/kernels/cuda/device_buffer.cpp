#include "kernels/cuda/device_buffer.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {

DeviceBuffer::DeviceBuffer(size_t size_bytes) { reserve(size_bytes); }

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reserve(size_t size_bytes) {
  if (size_bytes <= size_bytes_) return;
  release();
  const cudaError_t err = cudaMalloc(&data_, size_bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so later calls do not report it again
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    data_ = nullptr;
    throw CudaError("out of GPU memory: a buffer of " + std::to_string(size_bytes >> 20) +
                    " MiB with " + std::to_string(free_bytes >> 20) + " MiB free of " +
                    std::to_string(total_bytes >> 20));
  }
  KITE_CUDA_CHECK(err);
  size_bytes_ = size_bytes;
}

void DeviceBuffer::release() noexcept {
  // A destructor must not throw; a failing cudaFree here means the context is already broken,
  // and the next checked call reports it.
  if (data_) cudaFree(data_);
  data_ = nullptr;
  size_bytes_ = 0;
}

Tensor device_empty(const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto buffer = std::make_shared<DeviceBuffer>(bytes);
  void* data = buffer->data();
  return Tensor::wrap(data, shape, dtype, std::move(buffer), Device::kCuda);
}

namespace {

void copy_to_device(Tensor& dst, const void* src, cudaStream_t stream) {
  if (dst.size_bytes() == 0) return;
  KITE_CUDA_CHECK(
      cudaMemcpyAsync(dst.raw(), src, dst.size_bytes(), cudaMemcpyHostToDevice, stream));
  KITE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void check_host(const Tensor& t, const char* op) {
  KITE_CUDA_OP_CHECK(t.device() == Device::kCpu, op, "expected a host tensor");
}

}  // namespace

Tensor to_device(const Tensor& host, DType dtype, cudaStream_t stream) {
  check_host(host, "to_device");
  Tensor out = device_empty(host.shape(), dtype);
  if (host.dtype() == dtype) {
    copy_to_device(out, host.raw(), stream);
    return out;
  }
  KITE_CUDA_OP_CHECK(host.dtype() == DType::kF32 && dtype == DType::kBF16, "to_device",
                     "can convert F32 to BF16 only, not " + std::string(dtype_name(host.dtype())) +
                         " to " + std::string(dtype_name(dtype)));
  std::vector<uint16_t> bits(host.numel());
  const float* src = host.data<float>();
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(src[i]);
  copy_to_device(out, bits.data(), stream);
  return out;
}

namespace {

// Index arrays (token ids, slots, block tables) go to the device unconverted.
template <typename T>
Tensor index_to_device(std::span<const T> values, const Shape& shape, DType dtype,
                       cudaStream_t stream) {
  KITE_CUDA_OP_CHECK(shape_numel(shape) == static_cast<int64_t>(values.size()), "to_device",
                     "shape " + shape_to_string(shape) + " does not hold " +
                         std::to_string(values.size()) + " values");
  Tensor out = device_empty(shape, dtype);
  copy_to_device(out, values.data(), stream);
  return out;
}

}  // namespace

Tensor to_device(std::span<const int32_t> values, const Shape& shape, cudaStream_t stream) {
  return index_to_device(values, shape, DType::kI32, stream);
}

Tensor to_device(std::span<const int64_t> values, const Shape& shape, cudaStream_t stream) {
  return index_to_device(values, shape, DType::kI64, stream);
}

Tensor to_host(const Tensor& device, cudaStream_t stream) {
  KITE_CUDA_OP_CHECK(device.device() == Device::kCuda, "to_host", "expected a device tensor");
  Tensor out = Tensor::empty(device.shape(), device.dtype());
  if (out.size_bytes() != 0) {
    KITE_CUDA_CHECK(
        cudaMemcpyAsync(out.raw(), device.raw(), out.size_bytes(), cudaMemcpyDeviceToHost, stream));
  }
  KITE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

Tensor to_host_f32(const Tensor& device, cudaStream_t stream) {
  check_device_float(device, "to_host_f32", "tensor");
  return to_host(device, stream).to_f32();
}

void poison(Tensor& device, cudaStream_t stream) {
  KITE_CUDA_OP_CHECK(device.device() == Device::kCuda, "poison", "expected a device tensor");
  if (device.size_bytes() != 0)
    KITE_CUDA_CHECK(cudaMemsetAsync(device.raw(), 0xFF, device.size_bytes(), stream));
}

void check_device(const Tensor& t, DType dtype, const char* op, const char* name) {
  KITE_CUDA_OP_CHECK(t.defined() || t.numel() == 0, op, std::string(name) + " is undefined");
  KITE_CUDA_OP_CHECK(t.device() == Device::kCuda, op,
                     std::string(name) + " must be a device tensor");
  KITE_CUDA_OP_CHECK(t.dtype() == dtype, op,
                     std::string(name) + " must be " + std::string(dtype_name(dtype)) + ", got " +
                         std::string(dtype_name(t.dtype())));
}

void check_device_float(const Tensor& t, const char* op, const char* name) {
  KITE_CUDA_OP_CHECK(
      t.dtype() == DType::kF32 || t.dtype() == DType::kBF16, op,
      std::string(name) + " must be F32 or BF16, got " + std::string(dtype_name(t.dtype())));
  check_device(t, t.dtype(), op, name);
}

bool bytes_overlap(const Tensor& a, const Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.raw());
  const auto* b0 = static_cast<const char*>(b.raw());
  if (!a0 || !b0 || a.size_bytes() == 0 || b.size_bytes() == 0) return false;
  return a0 < b0 + b.size_bytes() && b0 < a0 + a.size_bytes();
}

}  // namespace kite::cuda
