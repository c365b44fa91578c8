#include "quant/smoothing_search.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/ops.h"
#include "quant/awq_loss.h"

namespace kite {
namespace {

// Records s for every part of every member (router included) and, when the group reads a
// norm's output, folds 1/s into that norm.
void assign_smoothing(const std::string& group,
                      const std::vector<const LinearActivations*>& members,
                      const std::vector<float>& s, QuantPlan& plan) {
  const bool folded = QuantPlan::input_norm_of(members[0]->parts[0].key).has_value();
  for (const LinearActivations* m : members)
    for (const LinearPart& p : m->parts) plan.smoothing[p.key] = Smoothing{s, folded};
  if (folded) plan.norm_divisors[group] = s;
}

// Per (row, group) the bound in {amax * (1 - i/20), i < 10} minimising the mean squared error
// of the group's partial dot products with the sample rows `x` [S, in]; w [out, in] smoothed.
std::vector<float> search_clip(const Tensor& w, const Tensor& x, int64_t group_size) {
  const int64_t n = w.size(0), k = w.size(1), rows = x.size(0);
  const int64_t groups = (k + group_size - 1) / group_size;
  std::vector<float> clip(n * groups);
#pragma omp parallel for schedule(dynamic)
  for (int64_t r = 0; r < n; ++r) {
    std::vector<float> deq(group_size);
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * group_size, len = std::min(group_size, k - c0);
      const float* wg = w.data<float>() + r * k + c0;
      float amax = 0;
      for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(wg[i]));
      double best = INFINITY;
      float best_bound = amax;
      for (int step = 0; step < 10; ++step) {
        const float bound = amax * (1.0f - step / 20.0f);
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < len; ++i) {
          const float v = std::clamp(wg[i], -bound, bound);
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
        const float s = f16_to_f32(f32_to_f16(std::max(hi - lo, 1e-5f) / 15.0f));
        const float z = std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
        for (int64_t i = 0; i < len; ++i) {
          const float v = std::clamp(wg[i], -bound, bound);
          deq[i] = (std::clamp(std::nearbyint(v / s) + z, 0.0f, 15.0f) - z) * s;
        }
        double err = 0;
        for (int64_t t = 0; t < rows; ++t) {
          const float* xt = x.data<float>() + t * k + c0;
          double d = 0;
          for (int64_t i = 0; i < len; ++i) d += static_cast<double>(xt[i]) * (wg[i] - deq[i]);
          err += d * d;
        }
        if (err < best) {
          best = err;
          best_bound = bound;
        }
      }
      clip[r * groups + g] = best_bound;
    }
  }
  return clip;
}

// Per input channel, the mean over output rows of |w| / max |w| of its quantization group
// (AutoAWQ's weight statistic for duo scaling), over all `weights` [out, in].
std::vector<float> normalized_weight_mean(const std::vector<const Tensor*>& weights,
                                          int64_t group_size) {
  const int64_t k = weights[0]->size(1);
  std::vector<double> sum(k, 0.0);
  int64_t rows = 0;
  for (const Tensor* w : weights) {
    for (int64_t r = 0; r < w->size(0); ++r) {
      const float* row = w->data<float>() + r * k;
      for (int64_t c0 = 0; c0 < k; c0 += group_size) {
        const int64_t c1 = std::min(k, c0 + group_size);
        float mx = 1e-8f;
        for (int64_t i = c0; i < c1; ++i) mx = std::max(mx, std::fabs(row[i]));
        for (int64_t i = c0; i < c1; ++i) sum[i] += std::fabs(row[i]) / mx;
      }
    }
    rows += w->size(0);
  }
  std::vector<float> mean(k);
  for (int64_t i = 0; i < k; ++i) mean[i] = static_cast<float>(sum[i] / std::max<int64_t>(rows, 1));
  return mean;
}

std::vector<const Tensor*> targets_weights(const std::vector<AwqTarget>& targets) {
  std::vector<const Tensor*> w;
  for (const AwqTarget& t : targets) w.push_back(&t.part->weight);
  return w;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<const LinearActivations*>>> smoothing_groups(
    const std::vector<LinearActivations>& acts) {
  std::map<std::string, std::vector<const LinearActivations*>> groups;
  for (const LinearActivations& a : acts) {
    if (a.parts.empty()) continue;
    const auto norm = QuantPlan::input_norm_of(a.parts[0].key);
    groups[norm ? *norm : a.parts[0].key].push_back(&a);
  }
  return {groups.begin(), groups.end()};
}

void smoothquant_plan(const std::vector<LinearActivations>& acts, double alpha, QuantPlan& plan) {
  for (const auto& [name, members] : smoothing_groups(acts)) {
    const int64_t k = members[0]->in;
    std::vector<float> act(k, 0.0f), wmax(k, 0.0f);
    bool any = false;
    for (const LinearActivations* m : members) {
      for (int64_t i = 0; i < k && !m->amax.empty(); ++i) act[i] = std::max(act[i], m->amax[i]);
      for (const LinearPart& p : m->parts) {
        if (!QuantPlan::is_quantizable(p.key)) continue;
        any = true;
        const float* w = p.weight.data<float>();
        for (int64_t r = 0; r < p.weight.size(0); ++r)
          for (int64_t i = 0; i < k; ++i) wmax[i] = std::max(wmax[i], std::fabs(w[r * k + i]));
      }
    }
    if (!any) continue;
    std::vector<float> s(k, 1.0f);
    for (int64_t i = 0; i < k; ++i)
      if (act[i] > 0 && wmax[i] > 0)
        s[i] =
            std::clamp(static_cast<float>(std::pow(act[i], alpha) / std::pow(wmax[i], 1 - alpha)),
                       1e-5f, 1e5f);
    assign_smoothing(name, members, s, plan);
  }
}

void awq_plan(const std::vector<LinearActivations>& acts, QuantPlan& plan) {
  constexpr int kGrid = 20;
  for (const auto& [name, members] : smoothing_groups(acts)) {
    const int64_t k = members[0]->in;
    // mean |x| from the member that saw the most rows (the router or q/kv see every token).
    const LinearActivations* widest = members[0];
    for (const LinearActivations* m : members)
      if (m->rows > widest->rows) widest = m;
    if (widest->rows == 0) continue;
    std::vector<float> x_mean(k);
    for (int64_t i = 0; i < k; ++i)
      x_mean[i] = std::max(static_cast<float>(widest->asum[i] / widest->rows), 1e-4f);
    const std::vector<AwqTarget> targets = awq_targets(members, kSampleRows);
    if (targets.empty()) continue;
    const std::vector<float> w_mean =
        normalized_weight_mean(targets_weights(targets), plan.group_size);
    double best = INFINITY;
    std::vector<float> best_s(k, 1.0f);
    int best_step = 0;
    // Steps 0..kGrid: s = x_mean^a; steps kGrid+1..2*kGrid+1: s = x_mean^a / w_mean^(1-a)
    // (AutoAWQ's duo scaling), both normalised to a geometric mid-range of 1.
    for (int step = 0; step <= 2 * kGrid + 1; ++step) {
      const bool duo = step > kGrid;
      const double a = static_cast<double>(duo ? step - kGrid - 1 : step) / kGrid;
      std::vector<float> s(k);
      float lo = INFINITY, hi = 0;
      for (int64_t i = 0; i < k; ++i) {
        double v = std::pow(x_mean[i], a);
        if (duo) v /= std::pow(std::max(w_mean[i], 1e-4f), 1.0 - a);
        s[i] = std::max(static_cast<float>(v), 1e-4f);
        lo = std::min(lo, s[i]);
        hi = std::max(hi, s[i]);
      }
      const float norm = std::sqrt(lo * hi);
      for (float& v : s) v /= norm;
      double err = 0;
      for (const AwqTarget& t : targets) err += awq_error(t, s, plan.group_size);
      if (err < best) {
        best = err;
        best_s = s;
        best_step = step;
      }
    }
    spdlog::debug("awq: {} step {}", name, best_step);
    assign_smoothing(name, members, best_s, plan);
    // Clipping on each linear's own (smoothed) partial outputs, as AutoAWQ clips.
    for (const AwqTarget& t : targets) {
      Tensor ws = t.part->weight.clone();
      const int64_t n = ws.size(0);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < k; ++i) ws.f32()[r * k + i] *= best_s[i];
      Tensor xs = t.x.clone();
      for (int64_t r = 0; r < xs.size(0); ++r)
        for (int64_t i = 0; i < k; ++i) xs.f32()[r * k + i] /= best_s[i];
      plan.int4_clip[t.part->key] = search_clip(ws, xs, plan.group_size);
    }
  }
}

}  // namespace kite
