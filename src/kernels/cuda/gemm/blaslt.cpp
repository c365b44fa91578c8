// cuBLASLt plumbing for linear (see blaslt.h).
//
// Row-major y[M,N] = x[M,K] W[N,K]^T is the column-major product y^T[N,M] = W^T^T x^T: cuBLASLt
// sees W's bytes as a K x N column-major matrix used transposed (op A = T) and x's bytes as a
// K x M column-major matrix (op B = N), writing an N x M column-major result whose bytes are
// row-major y. The bias epilogue adds bias[row] to each of those N rows, i.e. per feature.
#include "kernels/cuda/gemm/blaslt.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm/gemv.h"

namespace kite::cuda {

namespace {

cudaDataType_t cuda_type(DType dtype) { return dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

// Largest power of two (up to 256) that divides the address: cuBLASLt picks kernels by it.
int alignment_of(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && addr % align != 0) align /= 2;
  return align;
}

template <typename V>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
  KITE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <typename V>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
              const V& value) {
  KITE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

}  // namespace

BlasLtContext::BlasLtContext(size_t workspace_bytes) : workspace_(workspace_bytes) {
  KITE_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

BlasLtContext::~BlasLtContext() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

BlasLtContext::Plan& BlasLtContext::plan(const PlanKey& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  const auto [m, n, k, x_type, y_type, has_bias, align_x, align_w, align_y, align_bias] = key;
  const cudaDataType_t in = cuda_type(static_cast<DType>(x_type));
  const cudaDataType_t out = cuda_type(static_cast<DType>(y_type));
  auto plan = std::make_unique<Plan>();
  KITE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_attr(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_attr(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (has_bias) {
    set_attr(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_attr(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, out);
  }
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, in, k, n, k));   // W as K x N
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, in, k, m, k));   // x as K x M
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, out, n, m, n));  // y as N x M

  cublasLtMatmulPreference_t pref = nullptr;
  KITE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_.size_bytes());
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(align_w));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(align_x));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(align_y));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(align_y));
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c,
                                            pref, 1, &result, &found);
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  (void)align_bias;
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    throw CudaError("linear: cuBLASLt has no algorithm for M=" + std::to_string(m) +
                    " N=" + std::to_string(n) + " K=" + std::to_string(k) + " (status " +
                    std::to_string(static_cast<int>(status)) + ")");
  }
  plan->algo = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void linear(BlasLtContext& ctx, const Tensor& x, const Tensor& weight, const Tensor* bias,
            Tensor& y, cudaStream_t stream) {
  constexpr const char* kOp = "linear";
  check_device_float(x, kOp, "x");
  check_device(weight, x.dtype(), kOp, "weight");
  check_device_float(y, kOp, "y");
  KITE_CUDA_OP_CHECK(x.dtype() == DType::kBF16 || y.dtype() == DType::kF32, kOp,
                     "F32 inputs need an F32 output");
  KITE_CUDA_OP_CHECK(weight.dim() == 2, kOp,
                     "weight must be [N, K], got " + shape_to_string(weight.shape()));
  const int64_t n = weight.size(0), k = weight.size(1);
  KITE_CUDA_OP_CHECK(k > 0 && x.dim() >= 1 && x.size(-1) == k, kOp,
                     "x " + shape_to_string(x.shape()) +
                         " must have last dim K = " + std::to_string(k) + " (K > 0)");
  const int64_t m = x.numel() / k;
  KITE_CUDA_OP_CHECK(y.dim() >= 1 && y.size(-1) == n && y.numel() == m * n, kOp,
                     "y " + shape_to_string(y.shape()) + " must be [" + std::to_string(m) + ", " +
                         std::to_string(n) + "]");
  KITE_CUDA_OP_CHECK(!bytes_overlap(x, y) && !bytes_overlap(weight, y), kOp,
                     "y must not overlap x or weight");
  if (bias) {
    check_device(*bias, y.dtype(), kOp, "bias");
    KITE_CUDA_OP_CHECK(
        bias->numel() == n, kOp,
        "bias " + shape_to_string(bias->shape()) + " must have " + std::to_string(n) + " values");
  }
  if (m == 0 || n == 0) return;
  if (gemv_applies(x, weight, y)) {  // decode shapes: a W stream beats cuBLASLt there
    gemv(x, weight, bias, y, m, stream);
    return;
  }
  const BlasLtContext::PlanKey key{m,
                                   n,
                                   k,
                                   static_cast<int>(x.dtype()),
                                   static_cast<int>(y.dtype()),
                                   bias != nullptr,
                                   alignment_of(x.raw()),
                                   alignment_of(weight.raw()),
                                   alignment_of(y.raw()),
                                   bias ? alignment_of(bias->raw()) : 256};
  BlasLtContext::Plan& plan = ctx.plan(key);
  if (bias) set_attr(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias->raw());
  const float alpha = 1.0f, beta = 0.0f;
  KITE_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), plan.op, &alpha, weight.raw(), plan.a, x.raw(),
                                   plan.b, &beta, y.raw(), plan.c, y.raw(), plan.c, &plan.algo,
                                   ctx.workspace(), ctx.workspace_bytes(), stream));
}

}  // namespace kite::cuda
