// `kite eval`: perplexity of a (quantized) model on a text and its KL divergence / top-1
// agreement against the same model unquantized (quant/eval.h). The last stdout line is one
// JSON object.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/number_checks.h"
#include "quant/eval.h"

namespace kite::cli {

void add_eval_command(CLI::App& app, CommandRunner* run) {
  auto o = std::make_shared<EvalOptions>();
  auto* cmd = app.add_subcommand(
      "eval", "Perplexity on a text, and KL / top-1 agreement against the unquantized model");
  cmd->add_option("--model", o->model_dir, "Hugging Face model folder (default: kite-tiny)");
  cmd->add_option("--text", o->text_path, "UTF-8 text file to score")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--max-tokens", o->max_tokens, "Score at most this many tokens (0 = all)")
      ->check(kNonNegative);
  cmd->add_option("--window", o->window, "Tokens per scored window (default 512)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--chunk", o->chunk, "Tokens per forward step (default 256)")
      ->check(CLI::Range(1, 1 << 20));
  add_quantization_flags(cmd, &o->load.quant);
  cmd->callback([run, o] {
    *run = [o]() -> Status {
      if (o->model_dir.empty()) o->model_dir = default_model_dir();
      KITE_ASSIGN_OR_RETURN(EvalResult r, evaluate(*o));
      nlohmann::ordered_json j = {
          {"perplexity", r.perplexity},
          {"reference_perplexity", r.reference_perplexity},
          {"kl_divergence", r.kl_divergence},
          {"top1_agreement", r.top1_agreement},
          {"perplexity_increase_percent", 100.0 * (r.perplexity / r.reference_perplexity - 1.0)},
          {"tokens", r.tokens},
          {"windows", r.windows},
          {"quantization", std::string(quant_method_name(o->load.quant.method))},
          {"kv_cache_dtype", std::string(kv_cache_dtype_name(o->load.quant.kv_cache_dtype))},
          {"quantize_lm_head", o->load.quant.lm_head_quant() != QuantMethod::kNone},
          {"lm_head_quantization", std::string(quant_method_name(o->load.quant.lm_head_quant()))},
          {"calibration_seed", o->load.quant.calibration_seed},
          {"seconds", r.seconds}};
      std::printf("%s\n", j.dump().c_str());
      return ok_status();
    };
  });
}

}  // namespace kite::cli
