// Each `kite` subcommand lives in its own file and registers itself on the CLI11 app here.
// A registered command stores a callback; main() runs the one that was parsed and turns its
// Status into the exit code (0 OK, 1 error with the message on stderr).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "core/status.h"

namespace kite::cli {

using CommandRunner = std::function<Status()>;

// Each adds a subcommand to `app` and sets `*run` to its action when that subcommand parses.
void add_generate_command(CLI::App& app, CommandRunner* run);
void add_tokenize_command(CLI::App& app, CommandRunner* run);
void add_bench_command(CLI::App& app, CommandRunner* run);
void add_serve_command(CLI::App& app, CommandRunner* run);
void add_eval_command(CLI::App& app, CommandRunner* run);
void add_quantize_command(CLI::App& app, CommandRunner* run);

}  // namespace kite::cli
