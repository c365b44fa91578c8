// ActivationRecorder: the hook calibration uses to see every fp32 linear's inputs.
//
// While a recorder is installed (process-wide; calibration installs it around loading and
// running an unquantized model on one thread), Linear::load reports each weight it creates
// under its key, and every fp32 Linear call reports its input rows. Nothing is recorded when
// no recorder is installed (one relaxed atomic load per linear call).
#pragma once

#include <string>

#include "core/tensor.h"

namespace kite {

class ActivationRecorder {
 public:
  virtual ~ActivationRecorder() = default;
  // The checkpoint linear `key` was loaded with fp32 `weight` [out, in] as (part of) the Linear
  // whose weight bytes start at `linear_id` (gate and up share one stacked Linear).
  virtual void on_load(const std::string& key, const Tensor& weight, const void* linear_id) = 0;
  // The Linear `linear_id` ran on `x` [T, in].
  virtual void on_input(const void* linear_id, const Tensor& x) = 0;
};

ActivationRecorder* active_recorder();
// Installs `recorder` (null uninstalls). The caller keeps it alive while installed.
void set_active_recorder(ActivationRecorder* recorder);

}  // namespace kite
