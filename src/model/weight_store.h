// WeightStore: named tensors of a Hugging Face checkpoint folder, read through mmap.
//
// Opens `model.safetensors` or the shards listed in `model.safetensors.index.json`, validates
// every header up front (offsets inside the file, sizes matching dtype × shape), and hands out
// tensors by name. `get_f32` converts to fp32 (BF16/F16/F32/F64, and FP8 E4M3 dequantised with
// its `<name>_scale_inv` block scales when present) and checks the expected shape, so an
// architecture asks for exactly what it needs and a wrong checkpoint fails with the name.
//
// Sources, in order of preference: `model.safetensors.index.json` (sharded; every tensor it
// lists must be in its shard), `model.safetensors`, else every `*.safetensors` in the folder.
// A path to a single .safetensors file also works.
//
// FP8 block layout (DeepSeek-V3): weight W [rows, cols] in F8_E4M3 and scale_inv S
// [ceil(rows/br), ceil(cols/bc)] in F32/BF16; W_f32[r][c] = fp8(W[r][c]) * S[r/br][c/bc].
// Blocks at the bottom/right edge are partial.
//
// Lifetime: tensors from get_raw() view the mapping and keep it alive on their own, so they
// may outlive the WeightStore. The store is immutable after open() and safe to read from
// several threads.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kite {

struct ModelConfig;
struct QuantPlan;

struct WeightStoreOptions {
  // FP8 scale block size (quantization_config.weight_block_size).
  int64_t fp8_block_rows = 128;
  int64_t fp8_block_cols = 128;

  static WeightStoreOptions from_config(const ModelConfig& config);
};

// Dtype, shape and file of a stored tensor, without reading its bytes.
struct TensorInfo {
  DType dtype;
  Shape shape;
  std::string file;
};

class WeightStore {
 public:
  static Result<WeightStore> open(const std::string& model_dir);
  static Result<WeightStore> open(const std::string& model_dir, const WeightStoreOptions& options);
  // A store without files for `--load-format dummy`: get_f32 invents every tensor asked for
  // with the expected shape (model/dummy_weights.h, deterministic in seed and name), and
  // contains() is true for every name but a tied lm_head. names()/info()/get_raw() see nothing.
  static WeightStore dummy(const ModelConfig& config, uint64_t seed);
  bool is_dummy() const { return dummy_.has_value(); }

  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  size_t num_tensors() const { return entries_.size(); }
  const std::string& model_dir() const { return model_dir_; }
  Result<TensorInfo> info(const std::string& name) const;
  // Raw tensor as stored (dtype of the file), zero-copy view of the mapping.
  Result<Tensor> get_raw(const std::string& name) const;
  // fp32 copy with the shape checked against `expected` (error names tensor and both shapes).
  // FP8 tensors with a `_scale_inv` companion come back dequantised.
  Result<Tensor> get_f32(const std::string& name, const Shape& expected) const;

  // What Linear::load does with quantized checkpoints and on-load quantization (null: none).
  const QuantPlan* quant_plan() const { return quant_plan_.get(); }
  void set_quant_plan(std::shared_ptr<const QuantPlan> plan) { quant_plan_ = std::move(plan); }

 private:
  struct Entry {
    size_t file_index;
    DType dtype;
    Shape shape;
    size_t offset;  // from the start of the mapping
    size_t size_bytes;
  };
  struct MappedFile;

  Result<const Entry*> find_entry(const std::string& name) const;
  // Maps one safetensors file and records its tensors (a name seen twice is corrupt).
  Status add_file(const std::string& path);
  // Opens every shard the index names and checks each listed tensor is in its shard.
  Status add_index(const std::string& index_path);
  Result<Tensor> dequant_fp8_block(const std::string& name, const Entry& weight) const;
  const std::string& file_path(const Entry& e) const;

  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, Entry> entries_;
  std::string model_dir_;
  WeightStoreOptions options_;
  struct DummySpec {
    uint64_t seed;
    bool tie_word_embeddings;
  };
  std::optional<DummySpec> dummy_;
  std::shared_ptr<const QuantPlan> quant_plan_;
};

}  // namespace kite
