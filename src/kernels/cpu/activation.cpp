// Elementwise and row-wise activations: SwiGLU's silu(gate) * up, and softmax.
#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

namespace kite::ops {

void silu_mul(const Tensor& gate_up, Tensor& out) {
  constexpr const char* kOp = "silu_mul";
  cpu::check_f32(gate_up, kOp, "gate_up");
  cpu::check_f32(out, kOp, "out");
  KITE_OP_CHECK(gate_up.dim() >= 1 && gate_up.size(-1) % 2 == 0, kOp,
                "gate_up " + cpu::shape_of(gate_up) + " must have an even last dim [.., 2I]");
  const int64_t inter = gate_up.size(-1) / 2;
  const int64_t rows = inter == 0 ? 0 : gate_up.numel() / (2 * inter);
  KITE_OP_CHECK(out.numel() == rows * inter && (out.numel() == 0 || out.size(-1) == inter), kOp,
                "out " + cpu::shape_of(out) + " must be [" + std::to_string(rows) + ", " +
                    std::to_string(inter) + "] for gate_up " + cpu::shape_of(gate_up));
  KITE_OP_CHECK(!cpu::overlaps(gate_up, out) || out.raw() == gate_up.raw(), kOp,
                "out may only alias gate_up at its start");
  const float* in = gate_up.data<float>();
  float* o = out.data<float>();
  // Row r of out starts before row r of gate_up, so writing in row order never clobbers an
  // unread input even when out aliases gate_up; hence the serial row loop in that case.
  const bool aliased = out.raw() == gate_up.raw();
#pragma omp parallel for schedule(static) if (!aliased && rows * inter >= cpu::kParallelMinWork)
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = in + r * 2 * inter;
    const float* up = gate + inter;
    float* dst = o + r * inter;
    // silu(g) = g * sigmoid(g) = g / (1 + exp(-g)), the form torch's CPU kernel evaluates.
    for (int64_t j = 0; j < inter; ++j) dst[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
  }
}

void softmax(Tensor& x) {
  constexpr const char* kOp = "softmax";
  cpu::check_f32(x, kOp, "x");
  KITE_OP_CHECK(x.dim() >= 1 && x.size(-1) > 0, kOp, "x " + cpu::shape_of(x) + " has no columns");
  const int64_t cols = x.size(-1);
  const int64_t rows = x.numel() / cols;
  float* data = x.data<float>();
#pragma omp parallel for schedule(static) if (rows * cols >= cpu::kParallelMinWork)
  for (int64_t r = 0; r < rows; ++r) cpu::softmax_row(data + r * cols, data + r * cols, cols);
}

}  // namespace kite::ops
