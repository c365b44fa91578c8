#include "model/layers/rope_table.h"

#include <algorithm>
#include <cmath>

namespace kite {
namespace {

double yarn_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

double correction_dim(double rotations, int64_t dim, double base, double max_pos) {
  return (dim * std::log(max_pos / (rotations * 2.0 * M_PI))) / (2.0 * std::log(base));
}

}  // namespace

double RopeTable::deepseek_softmax_mscale(const RopeScaling& s) {
  if (s.type == RopeType::kDefault || s.mscale_all_dim == 0.0) return 1.0;
  double m = yarn_mscale(s.factor, s.mscale_all_dim);
  return m * m;
}

RopeTable::RopeTable(const ModelConfig& config, int64_t rot_dim) : rot_dim_(rot_dim) {
  const RopeScaling& s = config.rope_scaling;
  const double base = config.rope_theta;
  const int64_t half = rot_dim / 2;
  std::vector<float> plain(half);
  for (int64_t i = 0; i < half; ++i) {
    // transformers: 1 / base ** (arange(0, dim, 2).float() / dim), all in fp32.
    float exponent = static_cast<float>(2 * i) / static_cast<float>(rot_dim);
    plain[i] = 1.0f / std::pow(static_cast<float>(base), exponent);
  }
  inv_freq_ = plain;
  switch (s.type) {
    case RopeType::kDefault:
    case RopeType::kDynamic:  // dynamic NTK only changes lengths beyond the original context
      break;
    case RopeType::kLinear:
      for (auto& f : inv_freq_) f = f / static_cast<float>(s.factor);
      break;
    case RopeType::kLlama3: {
      const double old_len = static_cast<double>(s.original_max_position_embeddings);
      const double low_wavelen = old_len / s.low_freq_factor;
      const double high_wavelen = old_len / s.high_freq_factor;
      for (int64_t i = 0; i < half; ++i) {
        float f = plain[i];
        float wavelen = static_cast<float>(2.0 * M_PI) / f;
        float scaled = wavelen > low_wavelen ? f / static_cast<float>(s.factor) : f;
        bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        if (medium) {
          float smooth =
              (static_cast<float>(old_len) / wavelen - static_cast<float>(s.low_freq_factor)) /
              static_cast<float>(s.high_freq_factor - s.low_freq_factor);
          scaled = (1.0f - smooth) * scaled / static_cast<float>(s.factor) + smooth * scaled;
        }
        inv_freq_[i] = scaled;
      }
      break;
    }
    case RopeType::kYarn: {
      double factor = s.factor;
      double orig = s.original_max_position_embeddings > 0
                        ? static_cast<double>(s.original_max_position_embeddings)
                        : static_cast<double>(config.max_position_embeddings);
      if (s.attention_factor) {
        attention_factor_ = static_cast<float>(*s.attention_factor);
      } else if (s.mscale != 0.0 && s.mscale_all_dim != 0.0) {
        attention_factor_ = static_cast<float>(yarn_mscale(factor, s.mscale) /
                                               yarn_mscale(factor, s.mscale_all_dim));
      } else {
        attention_factor_ = static_cast<float>(yarn_mscale(factor, 1.0));
      }
      double low = correction_dim(s.beta_fast, rot_dim, base, orig);
      double high = correction_dim(s.beta_slow, rot_dim, base, orig);
      if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(rot_dim - 1));
      float lo = static_cast<float>(low), hi = static_cast<float>(high);
      if (lo == hi) hi += 0.001f;
      for (int64_t i = 0; i < half; ++i) {
        float ramp = std::clamp((static_cast<float>(i) - lo) / (hi - lo), 0.0f, 1.0f);
        float extrapolation_factor = 1.0f - ramp;
        float interp = plain[i] / static_cast<float>(factor);
        inv_freq_[i] = interp * (1.0f - extrapolation_factor) + plain[i] * extrapolation_factor;
      }
      break;
    }
  }
}

void RopeTable::compute(std::span<const int32_t> positions, Tensor& cos, Tensor& sin) const {
  const int64_t half = rot_dim_ / 2;
  const int64_t t = static_cast<int64_t>(positions.size());
  cos = Tensor::empty({t, half});
  sin = Tensor::empty({t, half});
  float* c = cos.data<float>();
  float* s = sin.data<float>();
  for (int64_t i = 0; i < t; ++i) {
    float pos = static_cast<float>(positions[i]);
    for (int64_t j = 0; j < half; ++j) {
      float angle = inv_freq_[j] * pos;  // fp32 product, as transformers computes it
      c[i * half + j] = std::cos(angle) * attention_factor_;
      s[i * half + j] = std::sin(angle) * attention_factor_;
    }
  }
}

}  // namespace kite
