// linear: y = x · W^T (+ bias) through OpenBLAS.
//
// W stays in its checkpoint layout [N, K] and is passed to BLAS as transposed, so no copy is
// made. M == 1 (decode of one sequence) uses gemv, which streams W once without the packing
// that gemm does; larger M uses sgemm. BLAS threads internally, so this op never opens an
// OpenMP region around the call.
#ifndef KITE_NO_BLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <cstring>

#include "kernels/cpu/blas_setup.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

namespace kite::ops {

void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y) {
  constexpr const char* kOp = "linear";
  cpu::check_f32(x, kOp, "x");
  cpu::check_f32(weight, kOp, "weight");
  cpu::check_f32(y, kOp, "y");
  KITE_OP_CHECK(weight.dim() == 2, kOp, "weight must be [N, K], got " + cpu::shape_of(weight));
  const int64_t n = weight.size(0);
  const int64_t k = weight.size(1);
  const int64_t m = cpu::rows_with_width(x, k, kOp, "x");
  KITE_OP_CHECK(y.size(-1) == n && y.numel() == m * n, kOp,
                "y " + cpu::shape_of(y) + " must be [" + std::to_string(m) + ", " +
                    std::to_string(n) + "] for x " + cpu::shape_of(x) + " and weight " +
                    cpu::shape_of(weight));
  KITE_OP_CHECK(!cpu::overlaps(x, y) && !cpu::overlaps(weight, y), kOp,
                "y must not alias x or weight");
  if (bias) {
    cpu::check_f32(*bias, kOp, "bias");
    KITE_OP_CHECK(bias->numel() == n, kOp,
                  "bias " + cpu::shape_of(*bias) + " must have " + std::to_string(n) + " values");
  }
  if (m == 0 || n == 0) return;

  float* out = y.data<float>();
  // Seed y with the bias (beta = 1) or zeros. Zeros are written explicitly rather than trusting
  // beta = 0 to overwrite: some OpenBLAS versions scale y by beta, which keeps NaN garbage.
  if (bias) {
    const float* b = bias->data<float>();
    for (int64_t row = 0; row < m; ++row) std::memcpy(out + row * n, b, n * sizeof(float));
  } else {
    std::fill(out, out + m * n, 0.0f);
  }
  if (k == 0) return;

  const float* a = x.data<float>();
  const float* w = weight.data<float>();
#ifdef KITE_NO_BLAS
  // Reference loop (GPU build, see CMakeLists.txt): each output is one dot product.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t c = 0; c < k; ++c) acc += a[i * k + c] * w[j * k + c];
      out[i * n + j] += acc;
    }
#else
  cpu::ensure_blas_ready();
  const cpu::BlasThreadsFor threads(m * n * k);
  if (m == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f, w,
                static_cast<int>(k), a, 1, 1.0f, out, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, a, static_cast<int>(k), w, static_cast<int>(k), 1.0f,
                out, static_cast<int>(n));
  }
#endif
}

}  // namespace kite::ops
