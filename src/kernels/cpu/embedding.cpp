// Token embedding lookup: out[t] = table[ids[t]].
#include <cstring>
#include <stdexcept>

#include "kernels/cpu/cpu_common.h"
#include "kernels/ops.h"

namespace kite::ops {

void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) {
  constexpr const char* kOp = "embedding";
  cpu::check_f32(table, kOp, "table");
  cpu::check_f32(out, kOp, "out");
  KITE_OP_CHECK(table.dim() == 2, kOp,
                "table must be [vocab, hidden], got " + cpu::shape_of(table));
  const int64_t vocab = table.size(0);
  const int64_t hidden = table.size(1);
  const auto num_tokens = static_cast<int64_t>(ids.size());
  KITE_OP_CHECK(out.numel() == num_tokens * hidden && (hidden == 0 || out.size(-1) == hidden), kOp,
                "out " + cpu::shape_of(out) + " must be [" + std::to_string(num_tokens) + ", " +
                    std::to_string(hidden) + "]");
  // Every id is checked before anything is written, so a bad batch leaves `out` untouched.
  for (int64_t t = 0; t < num_tokens; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) {
      throw std::out_of_range("embedding: token id " + std::to_string(ids[t]) + " at position " +
                              std::to_string(t) + " is outside the vocabulary of " +
                              std::to_string(vocab) + " tokens");
    }
  }
  const float* src = table.data<float>();
  float* dst = out.data<float>();
  for (int64_t t = 0; t < num_tokens; ++t) {
    std::memcpy(dst + t * hidden, src + static_cast<int64_t>(ids[t]) * hidden,
                hidden * sizeof(float));
  }
}

}  // namespace kite::ops
