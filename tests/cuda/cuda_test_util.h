// Helpers for the CUDA op tests: one stream for the binary, seeded random host tensors,
// bf16 rounding (so the CPU reference sees exactly the GPU's inputs), upload/download, and
// the error measure ||out - ref|| / ||ref|| (infinite when out has a NaN or an infinity).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm/blaslt.h"
#include "kernels/cuda/stream.h"

namespace kite::cuda::testing {

inline constexpr double kTolF32 = 1e-5;
inline constexpr double kTolBF16 = 2e-2;

inline double tolerance(DType dtype) { return dtype == DType::kBF16 ? kTolBF16 : kTolF32; }

// The stream every test queues on (created on first use, never destroyed: a static destructor
// would run after the CUDA runtime has begun to unload).
inline Stream& test_stream() {
  static Stream* stream = new Stream();
  return *stream;
}

// One cuBLASLt context for the tests that need one (never destroyed, as test_stream()).
inline BlasLtContext& test_blas() {
  static BlasLtContext* ctx = new BlasLtContext();
  return *ctx;
}

// The run's seed: KITE_CUDA_TEST_SEED if set, else fresh; main() prints it, so each run draws
// new inputs and a failing run can be repeated exactly.
uint32_t run_seed();

// Seeded from the run seed and the test's name, so every test draws different data.
inline std::mt19937 test_rng() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  std::vector<uint32_t> words(name.begin(), name.end());
  words.push_back(run_seed());
  std::seed_seq seq(words.begin(), words.end());
  return std::mt19937(seq);
}

inline Tensor random_host(const Shape& shape, std::mt19937& rng, float lo = -1.0f,
                          float hi = 1.0f) {
  Tensor t = Tensor::empty(shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.f32()) v = dist(rng);
  return t;
}

// Rounds every value through `dtype` (identity for F32), in place, and returns t.
inline Tensor& round_to(Tensor& t, DType dtype) {
  if (dtype == DType::kBF16)
    for (float& v : t.f32()) v = bf16_to_f32(f32_to_bf16(v));
  return t;
}

inline Tensor upload(const Tensor& host_f32, DType dtype) {
  return to_device(host_f32, dtype, test_stream());
}

inline Tensor download(const Tensor& device) { return to_host_f32(device, test_stream()); }

inline Tensor device_poisoned(const Shape& shape, DType dtype) {
  Tensor t = device_empty(shape, dtype);
  poison(t, test_stream());
  return t;
}

// ||out - ref|| / ||ref|| in double; +inf if out has any non-finite value or sizes differ.
inline double rel_error(const Tensor& out, const Tensor& ref) {
  if (out.numel() != ref.numel()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, norm = 0.0;
  const float* o = out.data<float>();
  const float* r = ref.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (!std::isfinite(o[i])) return std::numeric_limits<double>::infinity();
    diff += (static_cast<double>(o[i]) - r[i]) * (static_cast<double>(o[i]) - r[i]);
    norm += static_cast<double>(r[i]) * r[i];
  }
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

inline double rel_error(const std::vector<double>& out, const std::vector<double>& ref) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return std::numeric_limits<double>::infinity();
    diff += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

inline bool all_nan(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isnan(p[i])) return false;
  return true;
}

// y = x · W^T (+ bias) in float64 over host F32 tensors (x [M, K], W [N, K]): the reference the
// linear and GEMV tests compare against (exact on the rounded inputs both sides see).
inline Tensor linear_ref(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const int64_t n = w.size(0), k = w.size(1), m = x.numel() / k;
  Tensor y = Tensor::empty({m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? bias->data<float>()[j] : 0.0;
      const float* xr = x.data<float>() + i * k;
      const float* wr = w.data<float>() + j * k;
      for (int64_t p = 0; p < k; ++p) acc += static_cast<double>(xr[p]) * wr[p];
      y.data<float>()[i * n + j] = static_cast<float>(acc);
    }
  }
  return y;
}

// What `enqueue` queues on the test stream, captured once as a CUDA graph (as the backend
// captures decode steps); launch() replays it and waits for it.
class CapturedGraph {
 public:
  template <typename F>
  explicit CapturedGraph(F&& enqueue) {
    KITE_CUDA_CHECK(cudaStreamBeginCapture(test_stream(), cudaStreamCaptureModeThreadLocal));
    enqueue();
    KITE_CUDA_CHECK(cudaStreamEndCapture(test_stream(), &graph_));
    KITE_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~CapturedGraph() {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void launch() {
    KITE_CUDA_CHECK(cudaGraphLaunch(exec_, test_stream()));
    KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

inline std::string dtype_label(DType dtype) { return std::string(dtype_name(dtype)); }

}  // namespace kite::cuda::testing

// Expects rel_error(out, ref) <= tol, printing the error either way on failure.
#define KITE_EXPECT_CLOSE(out, ref, tol)                                             \
  do {                                                                               \
    const double kite_err_ = ::kite::cuda::testing::rel_error((out), (ref));         \
    EXPECT_LE(kite_err_, (tol)) << "relative error " << kite_err_ << " > " << (tol); \
  } while (0)
