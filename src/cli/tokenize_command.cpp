// Placeholder until the tokenizer lands; replaced by the tokenizer work.
#include "cli/commands.h"

namespace kite::cli {
void add_tokenize_command(CLI::App& app, CommandRunner* run) {
  auto* cmd = app.add_subcommand("tokenize", "Encode JSON Lines of strings to token ids (or --decode)");
  cmd->callback([run] { *run = [] { return unsupported("tokenize is not built yet"); }; });
}
}  // namespace kite::cli
