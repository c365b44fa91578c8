// WeightStore: named tensors of a Hugging Face checkpoint folder, read through mmap.
//
// Opens `model.safetensors` or the shards listed in `model.safetensors.index.json`, validates
// every header up front (offsets inside the file, sizes matching dtype × shape), and hands out
// tensors by name. `get_f32` converts to fp32 (BF16/F16/F32, and FP8 E4M3 dequantised with
// its `<name>_scale_inv` 128×128 block scales when present) and checks the expected shape, so
// an architecture asks for exactly what it needs and a wrong checkpoint fails with the name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kite {

class WeightStore {
 public:
  static Result<WeightStore> open(const std::string& model_dir);

  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;
  // Raw tensor as stored (dtype of the file), zero-copy view of the mapping.
  Result<Tensor> get_raw(const std::string& name) const;
  // fp32 copy with the shape checked against `expected` (error names tensor and both shapes).
  Result<Tensor> get_f32(const std::string& name, const Shape& expected) const;

 private:
  struct Entry {
    size_t file_index;
    DType dtype;
    Shape shape;
    size_t offset;  // from the start of the mapping
    size_t size_bytes;
  };
  struct MappedFile;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, Entry> entries_;
};

}  // namespace kite
