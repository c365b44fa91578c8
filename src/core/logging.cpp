#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace kite {

void init_logging(const std::string& level) {
  static bool done = false;
  if (!done) {
    auto logger = spdlog::stderr_color_mt("kite");
    spdlog::set_default_logger(logger);
    spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
    done = true;
  }
  std::string lv = level;
  if (lv.empty()) {
    const char* env = std::getenv("KITE_LOG");
    lv = env ? env : "info";
  }
  spdlog::set_level(spdlog::level::from_str(lv));
}

}  // namespace kite
