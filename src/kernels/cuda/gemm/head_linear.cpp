// Column-major view (as in blaslt.cpp): per head, W_h's bytes are a K x N matrix used
// transposed, x_h's a K x M matrix with leading dimension H * x_width (rows of other heads lie
// in between), y_h an N x M matrix with leading dimension H * y_width. Consecutive heads are
// x_width / y_width / N*K elements apart: the strided-batch offsets.
#include "kernels/cuda/gemm/head_linear.h"

#include <cstdint>
#include <numeric>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"

namespace kite::cuda {

namespace {

int alignment(const void* p, int64_t stride_bytes) {
  auto addr = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && (addr % align != 0 || stride_bytes % align != 0)) align /= 2;
  return align;
}

void make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols,
                 int64_t ld, int32_t batch, int64_t batch_stride) {
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld));
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                     &batch, sizeof(batch)));
  KITE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
      *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride, sizeof(batch_stride)));
}

}  // namespace

HeadLinear::HeadLinear() = default;
HeadLinear::~HeadLinear() = default;

void check_head_linear(const Tensor& x, int64_t x_off, const Tensor& w, const Tensor& y,
                       int64_t y_off) {
  constexpr const char* kOp = "head_linear";
  check_device_float(x, kOp, "x");
  check_device(w, x.dtype(), kOp, "w");
  check_device(y, x.dtype(), kOp, "y");
  KITE_CUDA_OP_CHECK(w.dim() == 3 && x.dim() == 3 && y.dim() == 3, kOp,
                     "x [T, H, x_width], w [H, N, K], y [T, H, y_width]");
  const int64_t t = x.size(0), heads = w.size(0), n = w.size(1), k = w.size(2);
  KITE_CUDA_OP_CHECK(x.size(1) == heads && y.size(1) == heads && y.size(0) == t, kOp,
                     "head counts / rows disagree");
  KITE_CUDA_OP_CHECK(x_off >= 0 && x_off + k <= x.size(2) && y_off >= 0 && y_off + n <= y.size(2),
                     kOp, "column ranges out of bounds");
}

void HeadLinear::run(BlasLtContext& ctx, const Tensor& x, int64_t x_off, const Tensor& w,
                     Tensor& y, int64_t y_off, cudaStream_t stream) {
  check_head_linear(x, x_off, w, y, y_off);
  const int64_t t = x.size(0), heads = w.size(0), n = w.size(1), k = w.size(2);
  const int64_t xw = x.size(2), yw = y.size(2);
  if (t == 0) return;
  if (head_gemv_applies(x, x_off, w)) return head_gemv(x, x_off, w, y, y_off, stream);
  const size_t es = dtype_size(x.dtype());
  const char* xp = static_cast<const char*>(x.raw()) + x_off * es;
  char* yp = static_cast<char*>(y.raw()) + y_off * es;
  const Key key{t, heads, n, k, xw, yw, static_cast<int>(x.dtype()),
                alignment(xp, xw * es), alignment(w.raw(), n * k * es), alignment(yp, yw * es)};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    const cudaDataType_t type = x.dtype() == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
    auto plan = std::make_unique<Plan>();
    KITE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    KITE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans,
                                                     sizeof(trans)));
    KITE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                     &no_trans, sizeof(no_trans)));
    const auto h32 = static_cast<int32_t>(heads);
    make_layout(&plan->a, type, k, n, k, h32, n * k);
    make_layout(&plan->b, type, k, t, heads * xw, h32, xw);
    make_layout(&plan->c, type, n, t, heads * yw, h32, yw);
    cublasLtMatmulPreference_t pref = nullptr;
    KITE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = ctx.workspace_bytes();
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                         sizeof(ws));
    const uint32_t al_x = std::get<7>(key), al_w = std::get<8>(key), al_y = std::get<9>(key);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_w,
                                         sizeof(al_w));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_x,
                                         sizeof(al_x));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_y,
                                         sizeof(al_y));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_y,
                                         sizeof(al_y));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        ctx.handle(), plan->op, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0)
      throw CudaError("head_linear: cuBLASLt has no algorithm for T=" + std::to_string(t) +
                      " H=" + std::to_string(heads) + " N=" + std::to_string(n) +
                      " K=" + std::to_string(k));
    plan->algo = result.algo;
    it = plans_.emplace(key, std::move(plan)).first;
  }
  Plan& p = *it->second;
  const float alpha = 1.0f, beta = 0.0f;
  KITE_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), p.op, &alpha, w.raw(), p.a, xp, p.b, &beta, yp,
                                   p.c, yp, p.c, &p.algo, ctx.workspace(), ctx.workspace_bytes(),
                                   stream));
}

}  // namespace kite::cuda
