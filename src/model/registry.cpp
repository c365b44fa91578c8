#include <spdlog/spdlog.h>

#include "model/model.h"
#include "quant/quant_plan.h"

namespace kite {

Result<LoadFormat> parse_load_format(std::string_view name) {
  if (name == "auto") return LoadFormat::kAuto;
  if (name == "dummy") return LoadFormat::kDummy;
  return invalid_argument("unknown load format '" + std::string(name) +
                          "' (expected auto or dummy)");
}

std::string_view load_format_name(LoadFormat format) {
  return format == LoadFormat::kDummy ? "dummy" : "auto";
}

Result<std::unique_ptr<Model>> load_model(const std::string& model_dir,
                                          const LoadOptions& options) {
  KITE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  const bool dummy = options.load_format == LoadFormat::kDummy;
  Result<WeightStore> weights =
      dummy ? Result<WeightStore>(WeightStore::dummy(config, options.dummy_seed))
            : WeightStore::open(model_dir, WeightStoreOptions::from_config(config));
  if (!weights.ok()) return weights.status();
  if (options.uses_quant_plan()) {
    std::shared_ptr<const QuantPlan> plan = options.plan;
    if (!plan) {
      // Dummy weights are meaningless: int8 / awq take the base plan, without calibration.
      if (needs_calibration(options.quant.method) && !dummy)
        return invalid_argument("--quantization " +
                                std::string(quant_method_name(options.quant.method)) +
                                " needs calibration: load through load_quantized_model");
      KITE_ASSIGN_OR_RETURN(plan, make_base_plan(model_dir, config, options.quant));
    }
    weights->set_quant_plan(std::move(plan));
  }
  KITE_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, create_backend(options.device));
  Result<std::unique_ptr<Model>> model = unsupported("model_type " + config.model_type_name);
  switch (config.model_type) {
    case ModelType::kLlama:
    case ModelType::kQwen2:
      model = build_llama_family(config, *weights, backend);
      break;
    case ModelType::kDeepseekV2:
    case ModelType::kDeepseekV3:
      model = build_deepseek(config, *weights, backend);
      break;
  }
  if (!model.ok()) return model.status().with_context("loading " + model_dir);
  spdlog::info("loaded {} ({} layers, hidden {}, vocab {}) from {}{} on {}",
               config.model_type_name, config.num_hidden_layers, config.hidden_size,
               config.vocab_size, model_dir, dummy ? " with dummy (random) weights" : "",
               backend->name());
  return model;
}

}  // namespace kite
