// The output error AWQ's scale search minimises for one smoothing group.
//
// Each quantizable linear of the group is a target, measured at its own output, or after the
// RMSNorm that follows it where one does (MLA's q_a_proj -> q_a_layernorm, kv_a_proj_with_mqa
// -> kv_a_layernorm on its latent channels; LinearPart::output_norm). q_a and kv_a read the
// same input_layernorm output and share one s, and what the layer uses is their normed
// outputs: the norm divides each row by its RMS and weighs each channel by the norm weight
// (kite-tiny: ~0.7 for q_a, ~1.5 for kv_a), so raw output errors misweigh the two against each
// other and the channels within each. Measured on kite-tiny: docs/BENCHMARKS.md.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "quant/smoothing_search.h"

namespace kite {

struct AwqTarget {
  const LinearPart* part;
  Tensor x;      // [S, in] sampled input rows
  Tensor y_ref;  // the unquantized output on x (normed where part->output_norm is defined)
};

// The targets of one group's members: every quantizable part of every member with samples,
// each on at most `max_rows` sample rows.
std::vector<AwqTarget> awq_targets(const std::vector<const LinearActivations*>& members,
                                   int64_t max_rows);

// The target's output on rows `x` computed with `weight` in place of its own.
Tensor awq_target_output(const AwqTarget& t, const Tensor& x, const Tensor& weight);

// Sum of squared differences between t.y_ref and the output computed from x / s and the
// dequantized group-wise INT4 weight W diag(s).
double awq_error(const AwqTarget& t, const std::vector<float>& s, int64_t group_size);

}  // namespace kite
