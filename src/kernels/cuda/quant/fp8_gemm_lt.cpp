#include "kernels/cuda/quant/fp8_gemm_lt.h"

#include <cublasLt.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <memory>
#include <tuple>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {
namespace {

// Descriptors and algorithm of one shape (the row-major/column-major mapping of blaslt.cpp:
// W as a K x N column-major matrix used transposed, x as K x M, y^T as N x M, layout c for
// both C and D); ok: cuBLASLt found an algorithm for it.
struct Fp8Plan : LtMatmulPlan {
  bool ok = false;
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

// scales: the outer-vector plan's scale pointers, set before the heuristic query (cuBLASLt
// answers CUBLAS_STATUS_INVALID_VALUE for outer vectors whose pointers are not set yet; every
// call sets its own after).
Fp8Plan& plan_for(BlasLtContext& ctx, const Key& key, const float* w_scale = nullptr,
                  const float* x_scale = nullptr) {
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
    set_attr(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scale);
    set_attr(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scale);
    if (has_bias) {
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_16BF);
    }
  }
  const cudaDataType_t codes = int8 ? CUDA_R_8I : CUDA_R_8F_E4M3;
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, codes, k, n, ldw));
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, codes, k, m, ldx));
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
      &plan->c, outer_vec ? CUDA_R_16BF : (int8 ? CUDA_R_32I : CUDA_R_32F), n, m, n));
  cublasLtMatmulPreference_t pref = nullptr;
  KITE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = ctx.workspace_bytes();
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, plan->op, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
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

// Which of the two FP8 routes a shape takes. On the H200 neither wins everywhere (device call
// 1 of 2026-11-30, M = 128, cuBLASLt 13's first algorithm): outer vectors 37.2 us against
// 38.3 + the scale pass for 128 x 28672 x 4096, but 38.3 against 25.1 + the pass for
// 128 x 4096 x 14336. So each (N, K, bias, M rounded up to a power of two) is timed once, on
// its first eager call, and keeps the faster route; KITE_CUDA_FP8_OUTER_VEC=0 / =1 forces one.
enum class Fp8Route { kOuter, kF32 };
using RouteKey = std::tuple<cublasLtHandle_t, int64_t, int64_t, int64_t, int64_t, bool, int64_t>;
std::map<RouteKey, Fp8Route>& routes() {
  static auto* r = new std::map<RouteKey, Fp8Route>();
  return *r;
}

int g_route_override = -1;  // set_fp8_lt_route_override
int g_last_route = -1;      // fp8_lt_last_route

int forced_route() {  // -1 timed, 0 F32 + scales, 1 outer vectors
  if (g_route_override >= 0) return g_route_override;
  static const int forced = [] {
    const char* v = std::getenv("KITE_CUDA_FP8_OUTER_VEC");
    if (v == nullptr) return -1;
    return std::string(v) == "0" ? 0 : 1;
  }();
  return forced;
}

// y BF16, or F32 (an lm_head's logits: without the F32 form, the 8-bit lm_head past 16 rows
// ran on quant_linear.cu's own tensor-core kernel, 457 us at 64 rows of Llama-3-8B's 128,256 x
// 4,096 against BF16 cuBLASLt's 395; BENCHMARKS.md, run 33); a bias BF16 (the plans' bias type).
bool lt_output_ok(const Tensor& y, const Tensor* bias) {
  return (y.dtype() == DType::kBF16 || y.dtype() == DType::kF32) &&
         (!bias || bias->dtype() == DType::kBF16);
}

int64_t pow2_at_least(int64_t m) {
  int64_t b = 1;
  while (b < m) b *= 2;
  return b;
}

// Mean time of `run` over three launches after one warm-up (the stream is not capturing).
template <typename Run>
float time_route(cudaStream_t stream, const Run& run) {
  run();
  cudaEvent_t start = nullptr, stop = nullptr;
  KITE_CUDA_CHECK(cudaEventCreate(&start));
  KITE_CUDA_CHECK(cudaEventCreate(&stop));
  KITE_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < 3; ++i) run();
  KITE_CUDA_CHECK(cudaEventRecord(stop, stream));
  KITE_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  KITE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 3.0f;
}

}  // namespace

bool fp8_rowwise_gemm(BlasLtContext& ctx, const void* wq, const float* w_scale, int64_t n,
                      int64_t ldw, const void* xq, const float* x_scale, int64_t m, int64_t ldx,
                      int64_t k, const Tensor* bias, Tensor& y, float* scratch,
                      cudaStream_t stream) {
  if (!lt_output_ok(y, bias)) return false;
  if (k % 16 != 0 || ldw % 16 != 0 || ldx % 16 != 0) return false;
  // F32 y (logits): the F32 route only (the outer-vector plan writes BF16).
  const int forced = y.dtype() == DType::kF32 ? 0 : forced_route();
  Fp8Plan* outer = nullptr;
  if (forced != 0) {
    Fp8Plan& p = plan_for(ctx, {ctx.handle(), m, n, k, ldw, ldx, bias != nullptr, true, false},
                          w_scale, x_scale);
    if (p.ok) outer = &p;
  }
  Fp8Plan* plain = nullptr;
  if (forced != 1 || !outer) {
    Fp8Plan& p = plan_for(ctx, {ctx.handle(), m, n, k, ldw, ldx, false, false, false});
    if (p.ok && scratch) plain = &p;
  }
  if (!outer && !plain) return false;

  const float alpha = 1.0f, beta = 0.0f;
  auto run_outer = [&] {
    // Scale pointers and bias change per call; the descriptor is this thread's alone.
    set_attr(outer->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scale);
    set_attr(outer->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scale);
    if (bias) set_attr(outer->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias->raw());
    KITE_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), outer->op, &alpha, wq, outer->a, xq, outer->b,
                                     &beta, y.raw(), outer->c, y.raw(), outer->c, &outer->algo,
                                     ctx.workspace(), ctx.workspace_bytes(), stream));
  };
  auto run_plain = [&] {  // the unscaled product into F32 scratch, then scales and bias
    KITE_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), plain->op, &alpha, wq, plain->a, xq, plain->b,
                                     &beta, scratch, plain->c, scratch, plain->c, &plain->algo,
                                     ctx.workspace(), ctx.workspace_bytes(), stream));
    scale_rows_cols(scratch, x_scale, w_scale, bias, y, m, n, stream);
  };
  Fp8Route route = outer ? Fp8Route::kOuter : Fp8Route::kF32;
  if (outer && plain) {
    const RouteKey key{ctx.handle(), n, k, ldw, ldx, bias != nullptr, pow2_at_least(m)};
    auto& chosen = routes();
    if (auto it = chosen.find(key); it != chosen.end()) {
      route = it->second;
    } else {
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      KITE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
      if (capturing == cudaStreamCaptureStatusNone) {  // timing needs an eager stream
        const float t_outer = time_route(stream, run_outer);
        const float t_plain = time_route(stream, run_plain);
        route = t_outer <= t_plain ? Fp8Route::kOuter : Fp8Route::kF32;
        chosen.emplace(key, route);
        if (std::getenv("KITE_CUDA_FP8_ROUTE_LOG"))
          std::fprintf(stderr,
                       "w8a8 gemm: M %lld (bucket %lld) N %lld K %lld: outer vectors %.1f us, "
                       "F32 + scales %.1f us\n",
                       static_cast<long long>(m), static_cast<long long>(pow2_at_least(m)),
                       static_cast<long long>(n), static_cast<long long>(k), t_outer * 1e3,
                       t_plain * 1e3);
      }
    }
  }
  if (route == Fp8Route::kOuter)
    run_outer();
  else
    run_plain();
  g_last_route = route == Fp8Route::kOuter ? 1 : 0;
  return true;
}

void set_fp8_lt_route_override(int route) { g_route_override = route; }
int fp8_lt_last_route() { return g_last_route; }

bool int8_rowwise_gemm(BlasLtContext& ctx, const void* wq, const float* w_scale, int64_t n,
                       int64_t ldw, const void* xq, const float* x_scale, int64_t m, int64_t ldx,
                       int64_t k, const Tensor* bias, Tensor& y, int32_t* scratch,
                       cudaStream_t stream) {
  if (!lt_output_ok(y, bias) || !scratch) return false;
  if (k % 16 != 0 || ldw % 16 != 0 || ldx % 16 != 0 || n % 4 != 0) return false;
  Fp8Plan& plan = plan_for(ctx, {ctx.handle(), m, n, k, ldw, ldx, false, false, true});
  if (!plan.ok) return false;
  const int32_t alpha = 1, beta = 0;
  KITE_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), plan.op, &alpha, wq, plan.a, xq, plan.b, &beta,
                                   scratch, plan.c, scratch, plan.c, &plan.algo, ctx.workspace(),
                                   ctx.workspace_bytes(), stream));
  scale_rows_cols(scratch, x_scale, w_scale, bias, y, m, n, stream);
  return true;
}

}  // namespace kite::cuda
