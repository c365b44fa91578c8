#ifdef KITE_WITH_CUDA
#include "kernels/cuda/backend/cuda_backend.h"
#endif
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"kite: a C++/CUDA engine that serves large language models"};
  app.require_subcommand(1);
  std::string log_level;
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error (default: $KITE_LOG or info)");

  kite::cli::CommandRunner run;
  kite::cli::add_generate_command(app, &run);
  kite::cli::add_tokenize_command(app, &run);
  kite::cli::add_bench_command(app, &run);
  kite::cli::add_serve_command(app, &run);
  kite::cli::add_eval_command(app, &run);
  kite::cli::add_quantize_command(app, &run);

  CLI11_PARSE(app, argc, argv);
  kite::init_logging(log_level);
#ifdef KITE_WITH_CUDA
  if (kite::cuda::cuda_device_available()) kite::cuda::register_cuda_backend();
#endif
  kite::Status status;
  try {
    status = run ? run() : kite::invalid_argument("no command given");
  } catch (const std::exception& e) {  // a bug must still end with a message and exit 1
    status = kite::internal_error(std::string("unexpected failure: ") + e.what());
  }
  if (!status.ok()) {
    std::fprintf(stderr, "kite: error: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
