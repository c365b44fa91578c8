#include "quant/awq_loss.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "quant/quant_plan.h"

namespace kite {
namespace {

Tensor samples_tensor(const LinearActivations& a, int64_t max_rows) {
  const int64_t rows = std::min(a.sample_rows(), max_rows);
  Tensor x = Tensor::empty({rows, a.in});
  std::copy(a.samples.begin(), a.samples.begin() + rows * a.in, x.data<float>());
  return x;
}

// RMSNorm with `weight` over the first weight.numel() channels of each row of y, in place (the
// rest, MLA's rotary key channels of kv_a, stay as they are, as the model uses them).
void rms_norm_prefix(Tensor& y, const Tensor& weight, float eps) {
  const int64_t n = weight.numel(), cols = y.size(1);
  const float* w = weight.data<float>();
  for (int64_t r = 0; r < y.size(0); ++r) {
    float* row = y.data<float>() + r * cols;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(row[i]) * row[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
    for (int64_t i = 0; i < n; ++i) row[i] = row[i] * inv * w[i];
  }
}

}  // namespace

std::vector<AwqTarget> awq_targets(const std::vector<const LinearActivations*>& members,
                                   int64_t max_rows) {
  std::vector<AwqTarget> targets;
  for (const LinearActivations* m : members) {
    if (m->sample_rows() == 0) continue;
    const Tensor x = samples_tensor(*m, max_rows);
    for (const LinearPart& p : m->parts) {
      if (!QuantPlan::is_quantizable(p.key)) continue;
      AwqTarget t{&p, x, Tensor()};
      t.y_ref = awq_target_output(t, x, p.weight);
      targets.push_back(std::move(t));
    }
  }
  return targets;
}

Tensor awq_target_output(const AwqTarget& t, const Tensor& x, const Tensor& weight) {
  Tensor y = Tensor::empty({x.size(0), weight.size(0)});
  ops::linear(x, weight, nullptr, y);
  if (t.part->output_norm.defined())
    rms_norm_prefix(y, t.part->output_norm, t.part->output_norm_eps);
  return y;
}

double awq_error(const AwqTarget& t, const std::vector<float>& s, int64_t group_size) {
  const int64_t k = t.x.size(1);
  Tensor ws = t.part->weight.clone();
  float* w = ws.data<float>();
  for (int64_t r = 0; r < ws.size(0); ++r)
    for (int64_t i = 0; i < k; ++i) w[r * k + i] *= s[i];
  const Tensor deq = quantize_int4_group(ws, group_size).dequantize();
  Tensor xs = t.x.clone();
  float* xd = xs.data<float>();
  for (int64_t r = 0; r < xs.size(0); ++r)
    for (int64_t i = 0; i < k; ++i) xd[r * k + i] /= s[i];
  const Tensor y = awq_target_output(t, xs, deq);
  double err = 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    err += std::pow(static_cast<double>(y.f32()[i]) - t.y_ref.f32()[i], 2);
  return err;
}

}  // namespace kite
