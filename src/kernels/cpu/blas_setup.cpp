// OpenBLAS kernel selection.
//
// Debian 12's OpenBLAS (0.3.21, built with DYNAMIC_ARCH) predates Sapphire/Emerald Rapids: it
// does not recognise their CPU model and falls back to its generic SSE3 "Prescott" kernels,
// which run sgemm about 3.5x slower than its AVX-512 "SkylakeX" kernels on the same machine
// (30 vs 108 GFLOP/s on one core, M=64, K=N=1024). OpenBLAS picks its core in a load-time
// constructor, before main, so kite re-runs that selection once, before its first BLAS call,
// when (a) the user did not choose a core through OPENBLAS_CORETYPE, (b) the detected core
// is one of the pre-AVX2 families, and (c) the CPU does support AVX2/AVX-512. The hooks are
// weak symbols: with another BLAS, or a static single-core OpenBLAS, nothing happens.
#include "kernels/cpu/blas_setup.h"

#include <cblas.h>
#include <omp.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "core/logging.h"
#include "kernels/cpu/cpu_common.h"

extern "C" {
char* openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace kite::ops::cpu {
namespace {

// Kernel families that use neither AVX2 nor AVX-512: a fallback on any modern x86 server.
bool is_pre_avx2_core(std::string_view name) {
  constexpr std::array<std::string_view, 10> kOld = {
      "Unknown", "Katmai", "Coppermine", "Northwood", "Prescott",
      "Banias",  "Atom",   "Core2",      "Nehalem",   "Sandybridge"};
  for (std::string_view old : kOld)
    if (name == old) return true;
  return false;
}

// The best OpenBLAS 0.3.21 family this CPU can run, or nullptr when it has no AVX2.
const char* best_supported_core() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

void select_core() {
  if (!openblas_get_corename || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice wins
  const char* detected = openblas_get_corename();
  const char* best = best_supported_core();
  if (detected == nullptr || best == nullptr || !is_pre_avx2_core(detected)) return;
  const std::string before = detected;
  // OpenBLAS reads OPENBLAS_CORETYPE only inside gotoblas_dynamic_init; unset it afterwards
  // so child processes see the environment the user gave.
  setenv("OPENBLAS_CORETYPE", best, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  spdlog::info(
      "OpenBLAS detected core '{}' on a CPU with {}-class features; using its '{}' "
      "kernels instead (set OPENBLAS_CORETYPE to choose)",
      before, best, blas_core_name());
}

}  // namespace

void ensure_blas_ready() {
  static std::once_flag once;
  std::call_once(once, select_core);
}

std::string blas_core_name() {
  const char* name = openblas_get_corename ? openblas_get_corename() : nullptr;
  return name ? name : "unknown";
}

BlasThreadsFor::BlasThreadsFor(int64_t madds) {
  if (madds >= kParallelMinMadds) return;
  const int threads = omp_get_max_threads();
  if (threads <= 1) return;
  omp_set_num_threads(1);
  restore_ = threads;
}

BlasThreadsFor::~BlasThreadsFor() {
  if (restore_) omp_set_num_threads(restore_);
}

}  // namespace kite::ops::cpu
