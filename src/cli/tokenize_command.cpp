// `kite tokenize --model DIR`: JSON Lines of strings on stdin -> JSON arrays of ids on stdout,
// or the reverse with --decode. DIR needs only tokenizer.json (+ tokenizer_config.json).
#include <iostream>

#include "cli/commands.h"
#include "tokenizer/tokenize_stream.h"
#include "tokenizer/tokenizer.h"

namespace kite::cli {

void add_tokenize_command(CLI::App& app, CommandRunner* run) {
  struct Flags {
    std::string model_dir;
    TokenizeStreamOptions options;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "tokenize", "Encode JSON Lines of strings (stdin) to JSON arrays of token ids (stdout)");
  cmd->add_option("--model", flags->model_dir, "Model directory holding tokenizer.json")
      ->required();
  cmd->add_flag("--add-special-tokens", flags->options.add_special_tokens,
                "Add the tokens the tokenizer's post-processor adds (e.g. BOS)");
  cmd->add_flag("--decode", flags->options.decode,
                "Reverse: JSON arrays of ids in, JSON strings out");
  cmd->add_flag("--skip-special-tokens", flags->options.skip_special_tokens,
                "With --decode: leave special tokens out of the text");
  cmd->callback([run, flags] {
    *run = [flags]() -> Status {
      KITE_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_dir(flags->model_dir));
      std::ios::sync_with_stdio(false);
      return run_tokenize_stream(tok, std::cin, std::cout, flags->options);
    };
  });
}

}  // namespace kite::cli
