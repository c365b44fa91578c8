#include <spdlog/spdlog.h>

#include "model/model.h"

namespace kite {

Result<std::unique_ptr<Model>> load_model(const std::string& model_dir) {
  KITE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  KITE_ASSIGN_OR_RETURN(WeightStore weights,
                        WeightStore::open(model_dir, WeightStoreOptions::from_config(config)));
  Result<std::unique_ptr<Model>> model = unsupported("model_type " + config.model_type_name);
  switch (config.model_type) {
    case ModelType::kLlama:
    case ModelType::kQwen2:
      model = build_llama_family(config, weights);
      break;
    case ModelType::kDeepseekV2:
    case ModelType::kDeepseekV3:
      model = build_deepseek(config, weights);
      break;
  }
  if (!model.ok()) return model.status().with_context("loading " + model_dir);
  spdlog::info("loaded {} ({} layers, hidden {}, vocab {}) from {}", config.model_type_name,
               config.num_hidden_layers, config.hidden_size, config.vocab_size, model_dir);
  return model;
}

}  // namespace kite
