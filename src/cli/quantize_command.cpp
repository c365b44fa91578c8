// `kite quantize`: writes a quantized copy of a checkpoint that kite loads back
// (quant/export.h for the layouts).
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "quant/calibration.h"
#include "quant/export.h"
#include "quant/output_folder.h"

namespace kite::cli {

void add_quantize_command(CLI::App& app, CommandRunner* run) {
  struct Flags {
    std::string model_dir, out_dir;
    LoadOptions load;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd =
      app.add_subcommand("quantize", "Write a quantized checkpoint (AWQ / compressed-tensors)");
  cmd->add_option("--model", f->model_dir, "Hugging Face model folder (default: kite-tiny)");
  cmd->add_option("--out", f->out_dir, "Folder to write")->required();
  add_method_option(cmd, "--method", &f->load.quant.method, {"fp8", "int8", "int4", "awq"},
                    "fp8|int8|int4|awq")
      ->required();
  add_calibration_flags(cmd, &f->load.quant);
  cmd->callback([run, f] {
    *run = [f]() -> Status {
      if (f->model_dir.empty()) f->model_dir = default_model_dir();
      // Before the plan: AWQ's calibration takes minutes on a large model.
      KITE_RETURN_IF_ERROR(check_load_options(f->model_dir, f->load));
      KITE_RETURN_IF_ERROR(check_output_folder(f->out_dir, f->model_dir));
      KITE_ASSIGN_OR_RETURN(std::shared_ptr<const QuantPlan> plan,
                            build_quant_plan(f->model_dir, f->load));
      return export_quantized_checkpoint(f->model_dir, *plan, f->out_dir);
    };
  });
}

}  // namespace kite::cli
