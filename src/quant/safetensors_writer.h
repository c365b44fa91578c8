// Minimal safetensors writer for `kite quantize`: tensors are added by name with a safetensors
// dtype string, shape and bytes, then written as one file (header padded to 8 bytes, data in
// insertion order, `__metadata__` {"format": "pt"}).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kite {

class SafetensorsWriter {
 public:
  void add(const std::string& name, const std::string& dtype, const Shape& shape, const void* data,
           size_t bytes);
  // A host tensor in its own dtype (F32, F16, BF16, F8_E4M3, I8, I32, U8).
  void add(const std::string& name, const Tensor& t);
  Status write(const std::string& path) const;
  size_t data_bytes() const { return data_.size(); }

 private:
  struct Entry {
    std::string name, dtype;
    Shape shape;
    size_t begin, end;
  };
  std::vector<Entry> entries_;
  std::string data_;
};

}  // namespace kite
