// Linear: a weight [out, in] (+ optional bias [out]) loaded by name into a backend's memory,
// applied with Backend::linear — or, when quantized (a quantized checkpoint or
// --quantization), with Backend::quantized_linear: on the CPU from the host form `quant`, on
// other backends from their own form `prepared` (the host form is dropped once prepared);
// `weight` is then undefined. Loading consults the WeightStore's QuantPlan
// (quant/quant_plan.h); dummy weights with --quantization are made quantized by the backend.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "model/weight_store.h"
#include "quant/quantized_weight.h"

namespace kite {

struct Linear {
  Tensor weight;                                 // [out_features, in_features]
  Tensor bias;                                   // [out_features] or undefined
  std::shared_ptr<const QuantizedWeight> quant;  // host form (CPU backend)
  std::shared_ptr<const void> prepared;          // the backend's form (Backend::prepare_quantized)
  int64_t prepared_out = 0, prepared_in = 0;

  bool quantized() const { return quant || prepared; }
  int64_t out_features() const {
    return quant ? quant->out_features : prepared ? prepared_out : weight.size(0);
  }
  int64_t in_features() const {
    return quant ? quant->in_features : prepared ? prepared_in : weight.size(1);
  }

  // y [T, out] = x [T, in] · W^T (+ b); y is step scratch of `be`.
  Tensor operator()(Backend& be, const Tensor& x) const;
  // The same into a given y [T, out] (its dtype: the backend's compute dtype or F32).
  // `codes` (here and below): x's activation codes made for this linear by the norm that wrote
  // x (Backend::add_rms_norm_codes, sized by norm_codes_bytes), or null. `fold`: the residual-add
  // + RMSNorm that x is the input of (FoldedNorm): the linear reads the norm's output,
  // made by its own kernel where folds_norm says so, else by add_rms_norm first.
  void apply(Backend& be, const Tensor& x, Tensor& y, const Tensor* codes = nullptr,
             const FoldedNorm* fold = nullptr) const;
  // The same for a stacked weight, its output split into consecutive parts of `widths`
  // features, each returned as its own [T, width] tensor (Backend::linear_split).
  std::vector<Tensor> split(Backend& be, const Tensor& x, std::span<const int64_t> widths,
                            const Tensor* codes = nullptr, const FoldedNorm* fold = nullptr) const;
  // silu(gate) * up [T, out / 2] for a stacked [gate; up] weight (Backend::linear_silu_mul;
  // quantized, with a bias or under the activation recorder: this linear, then silu_mul).
  Tensor silu_mul(Backend& be, const Tensor& x, const Tensor* codes = nullptr,
                  const FoldedNorm* fold = nullptr) const;
  // Whether this linear's kernel folds the norm before it at `rows` rows (Backend::folds_norm;
  // never under the activation recorder, which must see the norm's output).
  bool folds_norm(Backend& be, int64_t rows) const;
  // Bytes of the activation codes this linear reads at `rows` rows where the norm before it
  // makes them (Backend::norm_activation_codes_bytes); 0 where it reads none.
  int64_t norm_codes_bytes(Backend& be, int64_t rows) const {
    return prepared ? be.norm_activation_codes_bytes(prepared.get(), rows) : 0;
  }

  // Loads `<name>.weight` [out, in] and, if `with_bias`, `<name>.bias` [out].
  static Result<Linear> load(Backend& be, const WeightStore& weights, const std::string& name,
                             int64_t out, int64_t in, bool with_bias = false);
  // A linear stored under another tensor's name and planned as `key`: a tied lm_head is the
  // embedding's `tensor`, quantized (or not) as "lm_head".
  static Result<Linear> load_alias(Backend& be, const WeightStore& weights,
                                   const std::string& tensor, const std::string& key, int64_t out,
                                   int64_t in);
  // Rows of several weights stacked into one (e.g. gate and up into gate_up) so one GEMM
  // computes them all; each part is `<name>.weight` [out_i, in].
  // With `with_bias`, every part's `<name>.bias` [out_i] is stacked likewise.
  static Result<Linear> load_stacked(Backend& be, const WeightStore& weights,
                                     const std::vector<std::string>& names,
                                     const std::vector<int64_t>& outs, int64_t in,
                                     bool with_bias = false);
};

// `<name>` as a 1-D tensor of `size` in the backend's memory (norm weights, biases), with
// SmoothQuant/AWQ divisors folded in where the plan has them.
Result<Tensor> load_vector(Backend& be, const WeightStore& weights, const std::string& name,
                           int64_t size);

}  // namespace kite
