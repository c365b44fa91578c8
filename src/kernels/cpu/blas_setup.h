// One-time OpenBLAS setup for the CPU backend (see blas_setup.cpp for why it is needed).
#pragma once

#include <string>

namespace kite::ops::cpu {

// Idempotent and thread-safe; linear() calls it before its first BLAS call.
void ensure_blas_ready();

// The OpenBLAS kernel family in use ("SkylakeX", "Haswell", ...), or "unknown".
std::string blas_core_name();

}  // namespace kite::ops::cpu
