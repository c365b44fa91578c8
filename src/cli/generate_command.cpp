// `kite generate`: one prompt through the in-process engine, streaming only the generated
// text to stdout (logs go to stderr).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/llm.h"
#include "tokenizer/prompt_renderer.h"

namespace kite::cli {

void add_generate_command(CLI::App& app, CommandRunner* run) {
  struct Flags {
    EngineConfig engine;
    std::string prompt;
    std::string system;
    bool chat = false;
    SamplingParams sampling;
    int32_t max_tokens = 128;
    int64_t seed = -1;
  };
  auto f = std::make_shared<Flags>();
  f->sampling.temperature = 0.7f;
  auto* cmd =
      app.add_subcommand("generate", "Generate a continuation of a prompt (streams to stdout)");
  add_engine_flags(cmd, &f->engine);
  cmd->add_option("--prompt", f->prompt, "The prompt text")->required();
  cmd->add_flag("--chat", f->chat, "Wrap the prompt as a user message with the chat template");
  cmd->add_option("--system", f->system, "System prompt (with --chat)");
  cmd->add_option("--max-tokens", f->max_tokens, "Most tokens to generate")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", f->sampling.temperature, "0 = greedy (default 0.7)");
  cmd->add_option("--top-p", f->sampling.top_p, "Nucleus sampling mass in (0, 1]");
  cmd->add_option("--top-k", f->sampling.top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--min-p", f->sampling.min_p, "Drop tokens below min_p x the best");
  cmd->add_option("--repetition-penalty", f->sampling.repetition_penalty, "HF repetition penalty");
  cmd->add_option("--presence-penalty", f->sampling.presence_penalty, "OpenAI presence penalty");
  cmd->add_option("--frequency-penalty", f->sampling.frequency_penalty, "OpenAI frequency penalty");
  cmd->add_option("--seed", f->seed, "Seed for reproducible sampling");
  cmd->add_option("--stop", f->sampling.stop, "Stop string (repeatable)");
  cmd->add_flag("--ignore-eos", f->sampling.ignore_eos, "Keep generating past EOS");
  cmd->callback([run, f] {
    *run = [f]() -> Status {
      resolve_model_dir(&f->engine);
      f->sampling.max_tokens = f->max_tokens;
      if (f->seed >= 0) f->sampling.seed = static_cast<uint64_t>(f->seed);
      KITE_RETURN_IF_ERROR(f->sampling.validate());
      KITE_ASSIGN_OR_RETURN(LLM llm, LLM::create(f->engine));
      KITE_ASSIGN_OR_RETURN(PromptRenderer renderer,
                            PromptRenderer::create(llm.tokenizer(), f->engine.model_dir));
      GenerateInput input;
      input.sampling = f->sampling;
      if (f->chat) {
        nlohmann::ordered_json messages = nlohmann::ordered_json::array();
        if (!f->system.empty()) messages.push_back({{"role", "system"}, {"content", f->system}});
        messages.push_back({{"role", "user"}, {"content", f->prompt}});
        KITE_ASSIGN_OR_RETURN(input.prompt_token_ids, renderer.encode_chat(messages));
      } else {
        input.prompt_token_ids = renderer.encode_text(f->prompt);
      }
      KITE_ASSIGN_OR_RETURN(GenerateResult result,
                            llm.generate_stream(input, [](const RequestOutput& o) {
                              std::fwrite(o.text_delta.data(), 1, o.text_delta.size(), stdout);
                              std::fflush(stdout);
                            }));
      std::fputc('\n', stdout);
      if (result.finish_reason == "error") return internal_error(result.error_message);
      return ok_status();
    };
  });
}

}  // namespace kite::cli
