// The A/B switches of the CUDA backend (README): a KITE_CUDA_* variable set to "0" turns a
// route off; a few take a number. Read once by each caller (a static).
#pragma once

#include <cstdlib>
#include <cstring>

namespace kite::cuda {

inline bool env_switched_off(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

// A KITE_CUDA_* number (a size, a count): its value if set, else `fallback`.
inline long long env_number(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoll(v) : fallback;
}

}  // namespace kite::cuda
