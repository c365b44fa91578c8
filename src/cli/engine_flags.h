// Flags every engine-backed command shares (generate, serve, bench), named as in vLLM.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/engine_config.h"

namespace kite::cli {

// The model kite ships (models/kite-tiny), used when --model is not given: $KITE_MODEL, else
// next to the binary (../models/kite-tiny, ../share/kite/models/kite-tiny), else the source tree.
std::string default_model_dir();

// Adds --model, --kv-cache-memory, --block-size, --max-num-seqs, --max-num-batched-tokens,
// --max-model-len, --max-waiting, --load-format, the quantization flags,
// --no-enable-prefix-caching to `cmd`, writing into
// `config`.
void add_engine_flags(CLI::App* cmd, EngineConfig* config);
// Adds --quantization, --kv-cache-dtype, --calibration-text, --smoothquant-alpha,
// --calibration-seed, --quantize-lm-head and --lm-head-quantization (also used by `kite eval`,
// which has no engine).
void add_quantization_flags(CLI::App* cmd, QuantOptions* quant);
// The calibration flags alone (--calibration-text, --smoothquant-alpha, --calibration-seed,
// --quantize-lm-head, --lm-head-quantization): `kite quantize` names its method --method.
void add_calibration_flags(CLI::App* cmd, QuantOptions* quant);
// A flag naming a QuantMethod (--quantization, --lm-head-quantization, kite quantize's --method)
// parsed into *out, taking only `choices`.
CLI::Option* add_method_option(CLI::App* cmd, const std::string& flag, QuantMethod* out,
                               const std::vector<std::string>& choices, const std::string& help);
// Fills config->model_dir with the default when it is empty.
void resolve_model_dir(EngineConfig* config);

}  // namespace kite::cli
