// Error handling for the CUDA backend.
//
// Every CUDA runtime and cuBLASLt call goes through KITE_CUDA_CHECK / KITE_CUBLAS_CHECK, which
// turn a failure into kite::cuda::CudaError carrying the call, file:line and the library's own
// error string; KITE_CUDA_CHECK_LAUNCH() follows every kernel launch (launch errors such as a
// bad configuration surface only through cudaGetLastError). Shape and dtype mistakes in a
// launcher are programming errors and throw std::invalid_argument, as the CPU ops do.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace kite::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file,
                                          int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                  " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* expr,
                                            const char* file, int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                  " failed: cuBLAS status " + std::to_string(static_cast<int>(status)));
}

}  // namespace kite::cuda

#define KITE_CUDA_CHECK(expr)                                               \
  do {                                                                      \
    const cudaError_t kite_err_ = (expr);                                   \
    if (kite_err_ != cudaSuccess)                                           \
      ::kite::cuda::throw_cuda_error(kite_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a <<<...>>> launch: reports configuration errors now, not at the next sync.
#define KITE_CUDA_CHECK_LAUNCH() KITE_CUDA_CHECK(cudaGetLastError())

#define KITE_CUBLAS_CHECK(expr)                                                  \
  do {                                                                           \
    const cublasStatus_t kite_status_ = (expr);                                  \
    if (kite_status_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::kite::cuda::throw_cublas_error(kite_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// Throws std::invalid_argument("<op>: <message>") when `cond` is false; the message is built
// only on failure.
#define KITE_CUDA_OP_CHECK(cond, op, message)                                     \
  do {                                                                            \
    if (!(cond)) throw std::invalid_argument(std::string(op) + ": " + (message)); \
  } while (0)
