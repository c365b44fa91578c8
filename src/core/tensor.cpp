#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace kite {

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor Tensor::empty(Shape shape, DType dtype) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  size_t bytes = t.size_bytes();
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) throw std::bad_alloc();
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  if (t.size_bytes()) std::memset(t.data_, 0, t.size_bytes());
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, Shape shape) {
  if (shape_numel(shape) != static_cast<int64_t>(values.size()))
    throw std::invalid_argument("from_vector: shape " + shape_to_string(shape) +
                                " does not match " + std::to_string(values.size()) + " values");
  Tensor t = empty(std::move(shape));
  std::memcpy(t.data_, values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::wrap(void* data, Shape shape, DType dtype, std::shared_ptr<void> owner,
                    Device device) {
  Tensor t;
  t.device_ = device;
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::view(Shape shape) const {
  if (shape_numel(shape) != numel())
    throw std::invalid_argument("view: " + shape_to_string(shape_) + " -> " +
                                shape_to_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  if (dim() == 0 || begin < 0 || end > shape_[0] || begin > end)
    throw std::out_of_range("slice_rows out of range");
  Tensor t = *this;
  int64_t row = numel() / (shape_[0] ? shape_[0] : 1);
  t.data_ = static_cast<char*>(data_) + begin * row * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::clone() const {
  if (device_ != Device::kCpu)
    throw std::invalid_argument("clone: device tensor; copy it to the host first");
  Tensor t = empty(shape_, dtype_);
  if (size_bytes()) std::memcpy(t.data_, data_, size_bytes());
  return t;
}

Tensor Tensor::to_f32() const {
  if (device_ != Device::kCpu)
    throw std::invalid_argument("to_f32: device tensor; copy it to the host first");
  Tensor out = empty(shape_, DType::kF32);
  float* o = out.data<float>();
  const int64_t n = numel();
  switch (dtype_) {
    case DType::kF32:
      std::memcpy(o, data_, n * 4);
      break;
    case DType::kBF16: {
      auto* in = data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_f32(in[i]);
      break;
    }
    case DType::kF16: {
      auto* in = data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = f16_to_f32(in[i]);
      break;
    }
    case DType::kF8E4M3: {
      const float* lut = fp8e4m3_table();
      auto* in = data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = lut[in[i]];
      break;
    }
    case DType::kF64: {
      auto* in = data<double>();
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(in[i]);
      break;
    }
    default:
      throw std::invalid_argument("to_f32: unsupported dtype " + std::string(dtype_name(dtype_)));
  }
  return out;
}

}  // namespace kite
