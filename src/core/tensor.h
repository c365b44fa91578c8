// Tensor: a contiguous, row-major, typed view of bytes with shared ownership.
//
// Invariants: data is contiguous in row-major order of `shape()`; the buffer outlives every
// Tensor that views it (the shared `owner_` keeps it alive, whether it is a heap block or a
// memory-mapped file). Tensors are cheap to copy (they share bytes); `clone()` copies bytes.
// Only host memory exists today; Device is here so the CUDA backend plugs into the same type.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace kite {

enum class Device : uint8_t { kCpu, kCuda };

using Shape = std::vector<int64_t>;

std::string shape_to_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised host tensor, 64-byte aligned (AVX-friendly).
  static Tensor empty(Shape shape, DType dtype = DType::kF32);
  static Tensor zeros(Shape shape, DType dtype = DType::kF32);
  static Tensor from_vector(const std::vector<float>& values, Shape shape);
  // Wraps memory owned elsewhere (e.g. an mmap, or device memory with Device::kCuda); `owner`
  // keeps it alive. Host-side accessors (clone, to_f32, f32) are for kCpu tensors only.
  static Tensor wrap(void* data, Shape shape, DType dtype, std::shared_ptr<void> owner,
                     Device device = Device::kCpu);

  bool defined() const { return owner_ != nullptr || data_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t axis) const { return shape_.at(axis < 0 ? axis + dim() : axis); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t size_bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }
  void* raw() { return data_; }
  const void* raw() const { return data_; }

  // Same bytes, new shape (numel must match).
  Tensor view(Shape shape) const;
  // Rows [begin, end) along axis 0, sharing bytes.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Deep copy.
  Tensor clone() const;
  // Converts any float dtype (F32/F16/BF16/F8_E4M3/F64) to a new F32 tensor.
  Tensor to_f32() const;

  std::span<float> f32() { return {data<float>(), static_cast<size_t>(numel())}; }
  std::span<const float> f32() const { return {data<float>(), static_cast<size_t>(numel())}; }

 private:
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
};

}  // namespace kite
