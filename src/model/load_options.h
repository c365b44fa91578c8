// How load_model() obtains weights: from the checkpoint's safetensors files (kAuto), or
// invented from config.json alone (kDummy: deterministic random weights, for benchmarking
// shapes whose checkpoint is not at hand — the outputs are meaningless, the timings are not).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/tensor.h"
#include "quant/quant_method.h"

namespace kite {

struct QuantPlan;

enum class LoadFormat { kAuto, kDummy };

struct LoadOptions {
  LoadFormat load_format = LoadFormat::kAuto;
  uint64_t dummy_seed = 0;       // kDummy: same seed + same config -> bit-identical weights
  Device device = Device::kCpu;  // the backend the model runs on (kernels/backend.h)
  QuantOptions quant;            // --quantization and its companions
  // Filled by calibration (quant/calibration.h) for int8 / awq; load_model builds the rest.
  std::shared_ptr<const QuantPlan> plan;

  // Whether load_model puts the weights under a quant plan (`plan`, or else the base plan it
  // makes from config.json): real weights always (a checkpoint may be stored quantized), dummy
  // weights only when a quantization is asked for.
  bool uses_quant_plan() const {
    return load_format != LoadFormat::kDummy || quant.method != QuantMethod::kNone ||
           quant.lm_head_quant() != QuantMethod::kNone;
  }
};

// "auto" | "dummy" (the --load-format flag values, as in vLLM).
Result<LoadFormat> parse_load_format(std::string_view name);
std::string_view load_format_name(LoadFormat format);

}  // namespace kite
