// Logging goes through spdlog; this header fixes the format once for the whole program.
// Logs go to stderr so `kite generate` can stream only the generated text on stdout.
#pragma once

#include <spdlog/spdlog.h>

namespace kite {
// Idempotent; called by the CLI before anything logs. Level from --log-level or KITE_LOG.
void init_logging(const std::string& level = "");
}  // namespace kite
