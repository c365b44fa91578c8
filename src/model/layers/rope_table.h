// RopeTable: the rotary-embedding frequencies of one model, for every RoPE variant the
// supported configs use (default, linear, llama3, YaRN incl. DeepSeek's mscale), computed as
// transformers' ROPE_INIT_FUNCTIONS do, in fp32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace kite {

class RopeTable {
 public:
  // rot_dim: the number of rotated dims (head_dim for Llama, qk_rope_head_dim for MLA).
  RopeTable(const ModelConfig& config, int64_t rot_dim);

  int64_t rot_dim() const { return rot_dim_; }
  // Factor transformers multiplies cos/sin by (YaRN's attention_factor; 1 otherwise).
  float attention_factor() const { return attention_factor_; }
  // cos/sin [T, rot_dim/2] for the given positions.
  void compute(std::span<const int32_t> positions, Tensor& cos, Tensor& sin) const;

  // DeepSeek's extra softmax scale for YaRN: mscale(factor, mscale_all_dim)^2, or 1.
  static double deepseek_softmax_mscale(const RopeScaling& scaling);

 private:
  int64_t rot_dim_;
  std::vector<float> inv_freq_;
  float attention_factor_ = 1.0f;
};

}  // namespace kite
