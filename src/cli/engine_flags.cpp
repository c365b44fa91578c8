#include "cli/engine_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "cli/number_checks.h"

namespace kite::cli {

std::string default_model_dir() {
  if (const char* env = std::getenv("KITE_MODEL"); env && *env) return env;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const char* rel : {"../models/kite-tiny", "../share/kite/models/kite-tiny"}) {
      fs::path p = exe.parent_path() / rel;
      if (fs::exists(p / "config.json")) return fs::weakly_canonical(p).string();
    }
  }
  return KITE_DEFAULT_MODEL_DIR;
}

void add_engine_flags(CLI::App* cmd, EngineConfig* c) {
  cmd->add_option("--model", c->model_dir,
                  "Hugging Face model folder (default: the shipped kite-tiny)");
  cmd->add_option_function<double>(
         "--kv-cache-memory",
         [c](double mib) { c->kv_cache_memory_bytes = static_cast<int64_t>(mib * 1048576.0); },
         "KV cache budget in MiB (CPU; default 256)")
      ->check(kPositive);
  cmd->add_option("--block-size", c->block_size, "Tokens per KV block")->check(CLI::Range(1, 1024));
  cmd->add_option("--max-num-seqs", c->max_num_seqs, "Most requests running at once")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-num-batched-tokens", c->max_num_batched_tokens, "Token budget per step")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--max-model-len", c->max_model_len,
                  "Longest prompt + output (default: the model's max_position_embeddings)")
      ->check(kNonNegative);
  cmd->add_option("--max-waiting", c->max_waiting, "Queued requests beyond this get HTTP 429")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option_function<std::string>(
         "--load-format",
         [c](const std::string& name) {
           auto format = parse_load_format(name);
           if (!format.ok()) throw CLI::ValidationError("--load-format", format.status().message());
           c->load_format = *format;
         },
         "auto: read the checkpoint; dummy: random weights from config.json alone (benchmarks)")
      ->check(CLI::IsMember({"auto", "dummy"}));
  cmd->add_option("--device", c->device, "auto (GPU when present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--gpu-memory-utilization", c->gpu_memory_utilization,
                  "Share of GPU memory for weights + activations + KV cache (default 0.9)")
      ->check(CLI::Range(0.05, 1.0));
  add_quantization_flags(cmd, &c->quant);
  cmd->add_flag_callback(
      "--no-enable-prefix-caching", [c] { c->enable_prefix_caching = false; },
      "Disable automatic prefix caching");
  cmd->add_flag("--enforce-eager", c->enforce_eager,
                "Run every step eagerly (no CUDA graphs for decode steps)");
  cmd->add_flag("--host-sampling", c->host_sampling,
                "Sample on the host even when the backend can sample on the device");
}

CLI::Option* add_method_option(CLI::App* cmd, const std::string& flag, QuantMethod* out,
                               const std::vector<std::string>& choices, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          flag,
          [flag, out](const std::string& name) {
            auto m = parse_quant_method(name);
            if (!m.ok()) throw CLI::ValidationError(flag, m.status().message());
            *out = *m;
          },
          help)
      ->check(CLI::IsMember(choices));
}

void add_quantization_flags(CLI::App* cmd, QuantOptions* quant) {
  add_method_option(cmd, "--quantization", &quant->method, {"none", "fp8", "int8", "int4", "awq"},
                    "none|fp8|int8|int4|awq: quantize the weights on load (int8, awq need "
                    "--calibration-text)");
  cmd->add_option_function<std::string>(
         "--kv-cache-dtype",
         [quant](const std::string& name) {
           auto d = parse_kv_cache_dtype(name);
           if (!d.ok()) throw CLI::ValidationError("--kv-cache-dtype", d.status().message());
           quant->kv_cache_dtype = *d;
         },
         "auto|fp8: store the KV cache in FP8 E4M3 (per-layer scales from --calibration-text, "
         "else 1.0)")
      ->check(CLI::IsMember({"auto", "fp8", "fp8_e4m3"}));
  add_calibration_flags(cmd, quant);
}

void add_calibration_flags(CLI::App* cmd, QuantOptions* quant) {
  cmd->add_option("--calibration-text", quant->calibration_text,
                  "Text file for int8 (SmoothQuant) / awq calibration (first 4096 tokens)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--smoothquant-alpha", quant->smoothquant_alpha,
                  "SmoothQuant migration strength (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--calibration-seed", quant->calibration_seed,
                  "Seed of the calibration's row sampling (which input rows AWQ searches on)");
  cmd->add_flag("--quantize-lm-head", quant->quantize_lm_head,
                "Quantize lm_head too (plain per-channel FP8 / INT8 or INT4 group RTN)");
  add_method_option(cmd, "--lm-head-quantization", &quant->lm_head_method, {"fp8", "int8", "int4"},
                    "fp8|int8|int4: quantize lm_head in this plain form whatever --quantization "
                    "is (e.g. an 8-bit lm_head under int4 / awq linears)");
}

void resolve_model_dir(EngineConfig* c) {
  if (c->model_dir.empty()) c->model_dir = default_model_dir();
}

}  // namespace kite::cli
