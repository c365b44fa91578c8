// Dense linear layers through cuBLASLt.
//
// BlasLtContext owns the cuBLASLt handle, a workspace, and a cache of matmul plans (layouts and
// the heuristic's algorithm) keyed by shape, dtypes and pointer alignment, so a repeated shape
// (every decode step) costs no descriptor setup or heuristic query. One context per stream at
// a time: the workspace is shared by all calls made through it. Not thread-safe.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

#include "core/tensor.h"
#include "kernels/cuda/device_buffer.h"

namespace kite::cuda {

// Descriptors and algorithm of one prepared cuBLASLt matmul (op, the A / B / C-D layouts, the
// heuristic's algorithm), destroyed with it: the plan every cached cuBLASLt shape keeps.
struct LtMatmulPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  LtMatmulPlan() = default;
  LtMatmulPlan(const LtMatmulPlan&) = delete;
  LtMatmulPlan& operator=(const LtMatmulPlan&) = delete;
  ~LtMatmulPlan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

class BlasLtContext {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;
  explicit BlasLtContext(size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~BlasLtContext();
  BlasLtContext(const BlasLtContext&) = delete;
  BlasLtContext& operator=(const BlasLtContext&) = delete;

  cublasLtHandle_t handle() const { return handle_; }
  void* workspace() const { return workspace_.data(); }
  size_t workspace_bytes() const { return workspace_.size_bytes(); }

  using Plan = LtMatmulPlan;
  // m, n, k, x dtype, y dtype, has bias, alignment of the pointers (x, w, y, bias).
  using PlanKey = std::tuple<int64_t, int64_t, int64_t, int, int, bool, int, int, int, int>;
  Plan& plan(const PlanKey& key);

 private:
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

// y[M, N] = x[M, K] · weight[N, K]^T (+ bias[N]), the layout of ops::linear. Supported:
//   x, weight BF16 -> y BF16 or F32 (fp32 accumulation; bias in y's dtype);
//   x, weight F32  -> y F32 (plain fp32 arithmetic, no TF32).
// x and y may have leading dims ([B, S, K] -> [B, S, N]); y must not overlap x or weight.
void linear(BlasLtContext& ctx, const Tensor& x, const Tensor& weight, const Tensor* bias,
            Tensor& y, cudaStream_t stream);

}  // namespace kite::cuda
