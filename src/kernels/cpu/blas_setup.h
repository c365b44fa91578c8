// One-time OpenBLAS setup for the CPU backend (see blas_setup.cpp for why it is needed).
#pragma once

#include <cstdint>
#include <string>

namespace kite::ops::cpu {

// Idempotent and thread-safe; linear() calls it before its first BLAS call.
void ensure_blas_ready();

// The OpenBLAS kernel family in use ("SkylakeX", "Haswell", ...), or "unknown".
std::string blas_core_name();

// For one BLAS call of `madds` multiply-adds, on the calling thread: one thread below
// kParallelMinMadds (cpu_common.h), the thread count as it was otherwise; restored when the
// scope ends. OpenBLAS's OpenMP build (Debian's) sizes its team by omp_get_max_threads() on each
// call, and waking a team for a small GEMV costs more than the GEMV: kite-tiny decoded 3.3x
// faster with OMP_NUM_THREADS=1 on a 2-core machine, while its 512-token prefill and a
// Qwen2.5-0.5B decode ran 1.5-1.7x faster with two threads (docs/BENCHMARKS.md, "CPU decode").
class BlasThreadsFor {
 public:
  explicit BlasThreadsFor(int64_t madds);
  ~BlasThreadsFor();
  BlasThreadsFor(const BlasThreadsFor&) = delete;
  BlasThreadsFor& operator=(const BlasThreadsFor&) = delete;

 private:
  int restore_ = 0;  // the thread count to set back, 0 if it was not changed
};

}  // namespace kite::ops::cpu
