#include "kernels/cuda/quant/fp8_gemm_lt.h"

#include <cublasLt.h>

#include <cstdio>
#include <map>
#include <string>
#include <memory>
#include <tuple>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {
namespace {

// Descriptors and algorithm of one shape (the row-major/column-major mapping of blaslt.cpp:
// W as a K x N column-major matrix used transposed, x as K x M, y^T as N x M).
struct Fp8Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
  ~Fp8Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

template <typename V>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
  KITE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

// (handle, m, n, k, ldw, ldx, bias, outer-vector scaling) -> plan; one engine thread uses it.
// Without outer vectors the plan is a plain FP8 GEMM into F32 (scales applied afterwards).
// The last flag: INT8 codes (S8 x S8 -> S32, always unscaled) instead of FP8 E4M3.
using Key =
    std::tuple<cublasLtHandle_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool>;
std::map<Key, std::unique_ptr<Fp8Plan>>& plans() {
  static auto* p = new std::map<Key, std::unique_ptr<Fp8Plan>>();
  return *p;
}

Fp8Plan& plan_for(BlasLtContext& ctx, const Key& key) {
  auto& cache = plans();
  if (auto it = cache.find(key); it != cache.end()) return *it->second;
  const auto [handle, m, n, k, ldw, ldx, has_bias, outer_vec, int8] = key;
  auto plan = std::make_unique<Fp8Plan>();
  KITE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F,
                                             int8 ? CUDA_R_32I : CUDA_R_32F));
  set_attr(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_attr(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (outer_vec) {
    const int32_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    set_attr(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, outer);
    set_attr(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, outer);
    if (has_bias) {
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_16BF);
    }
  }
  const cudaDataType_t codes = int8 ? CUDA_R_8I : CUDA_R_8F_E4M3;
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, codes, k, n, ldw));
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, codes, k, m, ldx));
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
      &plan->d, outer_vec ? CUDA_R_16BF : (int8 ? CUDA_R_32I : CUDA_R_32F), n, m, n));
  cublasLtMatmulPreference_t pref = nullptr;
  KITE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = ctx.workspace_bytes();
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, plan->op, plan->a, plan->b, plan->d, plan->d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  plan->ok = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (plan->ok) plan->algo = result.algo;
  static bool told[3] = {false, false, false};
  const int kind = int8 ? 2 : outer_vec ? 1 : 0;
  if (!told[kind]) {  // once per kind: which route this GPU / cuBLASLt gives
    told[kind] = true;
    const std::string what =
        plan->ok ? std::string("available")
                 : "has no algorithm (status " + std::to_string(static_cast<int>(status)) + ")";
    const char* names[3] = {"per-tensor FP8 -> F32", "outer-vector scaling", "INT8 -> S32"};
    std::fprintf(stderr, "w8a8 gemm: cuBLASLt %s %s\n", names[kind], what.c_str());
  }
  return *cache.emplace(key, std::move(plan)).first->second;
}

}  // namespace

bool fp8_rowwise_gemm(BlasLtContext& ctx, const void* wq, const float* w_scale, int64_t n,
                      int64_t ldw, const void* xq, const float* x_scale, int64_t m, int64_t ldx,
                      int64_t k, const Tensor* bias, Tensor& y, float* scratch,
                      cudaStream_t stream) {
  if (y.dtype() != DType::kBF16 || (bias && bias->dtype() != DType::kBF16)) return false;
  if (k % 16 != 0 || ldw % 16 != 0 || ldx % 16 != 0) return false;
  Fp8Plan& plan = plan_for(ctx, {ctx.handle(), m, n, k, ldw, ldx, bias != nullptr, true, false});
  if (!plan.ok) {
    // Per-tensor route: the unscaled FP8 product into F32 scratch, then the scales and bias.
    Fp8Plan& plain = plan_for(ctx, {ctx.handle(), m, n, k, ldw, ldx, false, false, false});
    if (!plain.ok || !scratch) return false;
    const float alpha = 1.0f, beta = 0.0f;
    KITE_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), plain.op, &alpha, wq, plain.a, xq, plain.b,
                                     &beta, scratch, plain.d, scratch, plain.d, &plain.algo,
                                     ctx.workspace(), ctx.workspace_bytes(), stream));
    scale_rows_cols(scratch, x_scale, w_scale, bias, y, m, n, stream);
    return true;
  }
  // Scale pointers and bias change per call; the descriptor is this thread's alone.
  set_attr(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scale);
  set_attr(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scale);
  if (bias) set_attr(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias->raw());
  const float alpha = 1.0f, beta = 0.0f;
  KITE_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), plan.op, &alpha, wq, plan.a, xq, plan.b, &beta,
                                   y.raw(), plan.d, y.raw(), plan.d, &plan.algo, ctx.workspace(),
                                   ctx.workspace_bytes(), stream));
  return true;
}

bool int8_rowwise_gemm(BlasLtContext& ctx, const void* wq, const float* w_scale, int64_t n,
                       int64_t ldw, const void* xq, const float* x_scale, int64_t m, int64_t ldx,
                       int64_t k, const Tensor* bias, Tensor& y, int32_t* scratch,
                       cudaStream_t stream) {
  if (y.dtype() != DType::kBF16 || (bias && bias->dtype() != DType::kBF16) || !scratch) return false;
  if (k % 16 != 0 || ldw % 16 != 0 || ldx % 16 != 0 || n % 4 != 0) return false;
  Fp8Plan& plan = plan_for(ctx, {ctx.handle(), m, n, k, ldw, ldx, false, false, true});
  if (!plan.ok) return false;
  const int32_t alpha = 1, beta = 0;
  KITE_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), plan.op, &alpha, wq, plan.a, xq, plan.b, &beta,
                                   scratch, plan.d, scratch, plan.d, &plan.algo, ctx.workspace(),
                                   ctx.workspace_bytes(), stream));
  scale_rows_cols(scratch, x_scale, w_scale, bias, y, m, n, stream);
  return true;
}

}  // namespace kite::cuda
