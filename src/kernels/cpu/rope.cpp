// Rotary position embedding, in place, for both layouts Hugging Face uses.
//
// With h = rot_dim / 2 and (c_i, s_i) the cos/sin of pair i, over dims [rot_offset, +rot_dim):
//   kNeox:        pairs (x[i], x[i+h]) -> out[i]   = x[i]*c - x[i+h]*s
//                                         out[i+h] = x[i+h]*c + x[i]*s
//   kInterleaved: pairs (x[2i], x[2i+1]) -> out[i]   = x[2i]*c - x[2i+1]*s
//                                           out[i+h] = x[2i+1]*c + x[2i]*s
// The interleaved form writes the half-split layout, exactly as transformers'
// apply_rotary_pos_emb_interleave (DeepSeek-V3) does; DeepSeek-V2's complex form keeps pairs
// interleaved instead. Both are the same per-pair rotation followed by a fixed permutation of
// the rotary dims, and since q and k get the same permutation, q·k (all attention uses) is equal.
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

namespace kite::ops {
namespace {

inline void rope_neox(float* x, const float* cos, const float* sin, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i];
    const float b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

// `scratch` holds rot_dim floats: the input pairs must be read before the half-split writes.
inline void rope_interleaved(float* x, const float* cos, const float* sin, int64_t half,
                             float* scratch) {
  for (int64_t i = 0; i < 2 * half; ++i) scratch[i] = x[i];
  for (int64_t i = 0; i < half; ++i) {
    const float a = scratch[2 * i];
    const float b = scratch[2 * i + 1];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

}  // namespace

void rope(Tensor& x, int64_t rot_offset, int64_t rot_dim, const Tensor& cos, const Tensor& sin,
          RopeStyle style) {
  constexpr const char* kOp = "rope";
  cpu::check_f32(x, kOp, "x");
  cpu::check_f32(cos, kOp, "cos");
  cpu::check_f32(sin, kOp, "sin");
  KITE_OP_CHECK(x.dim() == 3, kOp, "x must be [T, num_heads, head_dim], got " + cpu::shape_of(x));
  const int64_t num_tokens = x.size(0);
  const int64_t num_heads = x.size(1);
  const int64_t head_dim = x.size(2);
  KITE_OP_CHECK(
      rot_dim > 0 && rot_dim % 2 == 0 && rot_offset >= 0 && rot_offset + rot_dim <= head_dim, kOp,
      "rotary dims [" + std::to_string(rot_offset) + ", " + std::to_string(rot_offset + rot_dim) +
          ") must be an even, non-empty range "
          "inside head_dim " +
          std::to_string(head_dim));
  const int64_t half = rot_dim / 2;
  for (const Tensor* t : {&cos, &sin}) {
    KITE_OP_CHECK(t->dim() == 2 && t->size(0) == num_tokens && t->size(1) == half, kOp,
                  "cos/sin " + cpu::shape_of(*t) + " must be [" + std::to_string(num_tokens) +
                      ", " + std::to_string(half) + "]");
  }
  float* data = x.data<float>();
  const float* c = cos.data<float>();
  const float* s = sin.data<float>();
  const int64_t items = num_tokens * num_heads;
#pragma omp parallel if (items * rot_dim >= cpu::kParallelMinWork)
  {
    std::vector<float> scratch(style == RopeStyle::kInterleaved ? rot_dim : 0);
#pragma omp for schedule(static)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t t = item / num_heads;
      float* v = data + item * head_dim + rot_offset;
      if (style == RopeStyle::kNeox) {
        rope_neox(v, c + t * half, s + t * half, half);
      } else {
        rope_interleaved(v, c + t * half, s + t * half, half, scratch.data());
      }
    }
  }
}

}  // namespace kite::ops
