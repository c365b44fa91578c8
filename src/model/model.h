// Model: a loaded decoder-only language model that runs one ForwardBatch at a time.
//
// Implementations live in archs/ (one file per architecture family) and are created by
// load_model() from a Hugging Face folder, on the backend (device) LoadOptions names.
// forward() is called by one thread (the engine thread); it writes the step's K/V into
// `cache` (allocated on the same backend) at batch.slot_mapping and returns logits
// [batch.logits_indices.size(), vocab_size] as a host fp32 tensor.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/load_options.h"
#include "model/weight_store.h"

namespace kite {

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual KvCacheSpec kv_cache_spec() const = 0;
  virtual Tensor forward(const ForwardBatch& batch, KvCache& cache) = 0;
  // The same logits left where the backend computed them (F32 [rows, vocab] in backend
  // memory, valid until the next step): for sampling on the device (Backend::sample).
  virtual Tensor forward_logits(const ForwardBatch& batch, KvCache& cache) = 0;
  // The device the weights live on; the KV cache must be allocated on it too.
  virtual Backend& backend() const = 0;
};

// Builds a model of one architecture family from a config and its weights.
using ModelBuilder = std::function<Result<std::unique_ptr<Model>>(
    const ModelConfig&, const WeightStore&, std::shared_ptr<Backend>)>;

// Loads config.json and the safetensors weights of `model_dir` and builds the model its
// model_type names. Errors name the file, tensor or field at fault. With
// options.load_format == kDummy only config.json is read and the weights are invented
// (WeightStore::dummy).
Result<std::unique_ptr<Model>> load_model(const std::string& model_dir,
                                          const LoadOptions& options = {});

// Architecture builders (archs/*.cpp).
Result<std::unique_ptr<Model>> build_llama_family(const ModelConfig&, const WeightStore&,
                                                  std::shared_ptr<Backend>);
Result<std::unique_ptr<Model>> build_deepseek(const ModelConfig&, const WeightStore&,
                                              std::shared_ptr<Backend>);

}  // namespace kite
