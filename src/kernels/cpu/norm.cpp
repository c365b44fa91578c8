// RMSNorm, plain and fused with the residual add, matching Hugging Face's LlamaRMSNorm in fp32:
//   variance = mean(x^2);  out = weight * (x * rsqrt(variance + eps))
// The sum of squares is accumulated in double and the mean rounded to fp32 before eps is
// added, so the only difference from torch is torch's own fp32 reduction error.
#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

namespace kite::ops {
namespace {

// One row; out may alias x (each element is read before it is written).
inline void rms_norm_row(const float* x, const float* weight, float eps, int64_t n, float* out) {
  const float variance = static_cast<float>(cpu::sum_squares_f64(x, n) / static_cast<double>(n));
  const float inv_rms = 1.0f / std::sqrt(variance + eps);
  for (int64_t j = 0; j < n; ++j) out[j] = weight[j] * (x[j] * inv_rms);
}

// Checks shared by both ops; returns the number of rows.
int64_t check_norm_args(const char* op, const Tensor& x, const Tensor& weight, const Tensor& out) {
  cpu::check_f32(x, op, "x");
  cpu::check_f32(weight, op, "weight");
  cpu::check_f32(out, op, "out");
  KITE_OP_CHECK(x.dim() >= 1 && x.size(-1) > 0, op, "x " + cpu::shape_of(x) + " has no features");
  const int64_t hidden = x.size(-1);
  KITE_OP_CHECK(weight.numel() == hidden, op,
                "weight " + cpu::shape_of(weight) + " must have " + std::to_string(hidden) +
                    " values to match x " + cpu::shape_of(x));
  KITE_OP_CHECK(out.numel() == x.numel() && out.size(-1) == hidden, op,
                "out " + cpu::shape_of(out) + " must match x " + cpu::shape_of(x));
  return x.numel() / hidden;
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  const int64_t rows = check_norm_args("rms_norm", x, weight, out);
  const int64_t hidden = x.size(-1);
  const float* in = x.data<float>();
  const float* w = weight.data<float>();
  float* o = out.data<float>();
#pragma omp parallel for schedule(static) if (rows * hidden >= cpu::kParallelMinWork)
  for (int64_t r = 0; r < rows; ++r) rms_norm_row(in + r * hidden, w, eps, hidden, o + r * hidden);
}

void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  const int64_t rows = check_norm_args("add_rms_norm", x, weight, out);
  cpu::check_f32(residual, "add_rms_norm", "residual");
  KITE_OP_CHECK(residual.numel() == x.numel() && residual.size(-1) == x.size(-1), "add_rms_norm",
                "residual " + cpu::shape_of(residual) + " must match x " + cpu::shape_of(x));
  KITE_OP_CHECK(!cpu::overlaps(residual, out), "add_rms_norm", "out must not alias residual");
  const int64_t hidden = x.size(-1);
  float* res = residual.data<float>();
  const float* in = x.data<float>();
  const float* w = weight.data<float>();
  float* o = out.data<float>();
  // Row by row, so out may alias x or residual: a row is fully summed before it is normalised.
#pragma omp parallel for schedule(static) if (rows * hidden >= cpu::kParallelMinWork)
  for (int64_t r = 0; r < rows; ++r) {
    float* res_row = res + r * hidden;
    const float* x_row = in + r * hidden;
    for (int64_t j = 0; j < hidden; ++j) res_row[j] += x_row[j];
    rms_norm_row(res_row, w, eps, hidden, o + r * hidden);
  }
}

}  // namespace kite::ops
