// From recorded calibration activations to SmoothQuant / AWQ smoothing factors and AWQ clipping
// bounds in a QuantPlan (the algorithms are described in quant/calibration.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "quant/quant_plan.h"

namespace kite {

inline constexpr int64_t kSampleRows = 512;  // input rows kept per linear by calibration

// One checkpoint linear that is (part of) a recorded Linear.
struct LinearPart {
  LinearPart(std::string k, Tensor w) : key(std::move(k)), weight(std::move(w)) {}
  std::string key;
  Tensor weight;  // fp32 [out, in] as loaded
  // The RMSNorm weight applied to this linear's first output_norm.numel() outputs, where one
  // follows (QuantPlan::output_norm_of; undefined otherwise): AWQ measures the error after it.
  Tensor output_norm;
  float output_norm_eps = 1e-6f;
};

// What calibration saw at one Linear's input.
struct LinearActivations {
  std::vector<LinearPart> parts;  // gate and up share one Linear
  int64_t in = 0;
  std::vector<float> amax;     // [in] max |x| per channel
  std::vector<double> asum;    // [in] sum |x| per channel
  int64_t rows = 0;            // rows seen
  std::vector<float> samples;  // [sample_rows, in] uniformly sampled input rows
  int64_t sample_rows() const { return in ? static_cast<int64_t>(samples.size()) / in : 0; }
};

void smoothquant_plan(const std::vector<LinearActivations>& acts, double alpha, QuantPlan& plan);
void awq_plan(const std::vector<LinearActivations>& acts, QuantPlan& plan);

// Groups of recorded linears that read the same input: all readers of one norm's output
// together (key = the norm weight's name), every other linear alone (key = its own key).
std::vector<std::pair<std::string, std::vector<const LinearActivations*>>> smoothing_groups(
    const std::vector<LinearActivations>& acts);

}  // namespace kite
