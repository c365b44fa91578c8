// libFuzzer target: config.json parsing and validation (model/config.h) on arbitrary bytes.
// An accepted config must describe a model kite can build: positive sizes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = kite::parse_model_config(text, "fuzz/config.json");
  if (!config.ok()) {
    if (config.status().message().empty()) std::abort();
    return 0;
  }
  if (config->hidden_size <= 0 || config->num_hidden_layers <= 0 || config->vocab_size <= 0)
    std::abort();
  return 0;
}
