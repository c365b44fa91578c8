// Placeholder until the model runner lands.
#include "cli/commands.h"

namespace kite::cli {
void add_generate_command(CLI::App& app, CommandRunner* run) {
  auto* cmd = app.add_subcommand("generate", "Generate a continuation of a prompt");
  cmd->callback([run] { *run = [] { return unsupported("generate is not built yet"); }; });
}
}  // namespace kite::cli
