#include "model/layers/linear.h"

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/quant_ops.h"
#include "quant/activation_recorder.h"
#include "quant/checkpoint_formats.h"
#include "quant/quant_plan.h"

namespace kite {
namespace {

// After the fp32 weight is loaded (the parts `keys` stacked by rows, `outs` rows each): report
// each part to a calibration recorder, then let the store's plan smooth and/or quantize each
// part (gate and up share their input, so they are smoothed alike and both quantized or not).
Status finish_load(const WeightStore& weights, const std::vector<std::string>& keys,
                   const std::vector<int64_t>& outs, Linear& l) {
  ActivationRecorder* rec = active_recorder();
  const QuantPlan* plan = weights.quant_plan();
  if (!rec && !plan) return ok_status();
  std::vector<QuantizedWeight> quantized;
  int64_t row = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    Tensor part = l.weight.slice_rows(row, row + outs[i]);
    if (rec) rec->on_load(keys[i], part, l.weight.raw());
    if (plan) {
      KITE_ASSIGN_OR_RETURN(std::optional<QuantizedWeight> q, plan_linear(*plan, keys[i], part));
      if (q) quantized.push_back(std::move(*q));
    }
    row += outs[i];
  }
  if (quantized.empty()) return ok_status();
  if (quantized.size() != keys.size())
    return internal_error("'" + keys[0] + "': the plan quantizes only some stacked parts");
  KITE_ASSIGN_OR_RETURN(QuantizedWeight q, quantized.size() == 1
                                               ? Result<QuantizedWeight>(std::move(quantized[0]))
                                               : stack_quantized_rows(quantized));
  l.quant = std::make_shared<const QuantizedWeight>(std::move(q));
  l.weight = Tensor();
  return ok_status();
}

// A quantized weight in the form the backend runs: the CPU keeps the host form; others
// prepare their own (CUDA: the kernels' device layout) and the host form is dropped.
Status place_quantized(Backend& be, const std::string& name, Linear& l) {
  if (be.device() == Device::kCpu) return ok_status();
  try {
    l.prepared = be.prepare_quantized(*l.quant);
  } catch (const std::exception& e) {
    return unsupported("'" + name + "': " + e.what());
  }
  if (!l.prepared)
    return unsupported("'" + name + "': the " + std::string(device_name(be.device())) +
                       " backend does not run " + std::string(quant_format_name(l.quant->format)) +
                       " weights");
  l.prepared_out = l.quant->out_features;
  l.prepared_in = l.quant->in_features;
  l.quant.reset();
  return ok_status();
}

// The fp32 weight of `l` (the parts `keys`, `outs` rows each) through the plan, then into the
// backend: its quantized form where the plan quantized it, else the weight uploaded.
Status finish_and_place(Backend& be, const WeightStore& weights,
                        const std::vector<std::string>& keys, const std::vector<int64_t>& outs,
                        Linear& l) {
  KITE_RETURN_IF_ERROR(finish_load(weights, keys, outs, l));
  if (l.quant) return place_quantized(be, keys[0], l);
  l.weight = be.upload(l.weight);
  return ok_status();
}

// Dummy weights with --quantization on a backend that makes them itself: the quantized form
// straight from the shape (an 8B model is not generated and quantized on the host).
std::optional<QuantFormat> dummy_format(const WeightStore& weights, const std::string& key) {
  const QuantPlan* plan = weights.quant_plan();
  if (!weights.is_dummy() || !plan || !plan->quantizes(key)) return std::nullopt;
  switch (plan->method_of(key)) {
    case QuantMethod::kFp8:
      return QuantFormat::kFp8PerChannel;
    case QuantMethod::kInt8:
      return QuantFormat::kInt8PerChannel;
    case QuantMethod::kInt4:
    case QuantMethod::kAwq:
      return QuantFormat::kInt4Group;
    default:
      return std::nullopt;
  }
}

bool load_dummy_quantized(Backend& be, const WeightStore& weights, const std::string& key,
                          int64_t out, int64_t in, Linear& l) {
  const std::optional<QuantFormat> format = dummy_format(weights, key);
  if (!format || be.device() == Device::kCpu) return false;
  uint64_t seed = 1469598103934665603ull;  // FNV-1a of the key
  for (unsigned char c : key) seed = (seed ^ c) * 1099511628211ull;
  l.prepared = be.dummy_quantized(*format, out, in, seed);
  if (!l.prepared) return false;
  l.prepared_out = out;
  l.prepared_in = in;
  return true;
}

// No recorder, and no plan or one that neither quantizes nor smooths any of `keys` (e.g. a plan
// that quantizes only lm_head): the backend may load the weight its own way (CUDA: dummy weights
// made on the device instead of generated in fp32 on the host and uploaded).
bool plain_load(const WeightStore& weights, std::span<const std::string> keys) {
  if (active_recorder() != nullptr) return false;
  const QuantPlan* plan = weights.quant_plan();
  if (plan == nullptr) return true;
  for (const std::string& key : keys)
    if (plan->changes(key)) return false;
  return true;
}

}  // namespace

Tensor Linear::operator()(Backend& be, const Tensor& x) const {
  Tensor y = be.empty({x.size(0), out_features()});
  apply(be, x, y);
  return y;
}

bool Linear::folds_norm(Backend& be, int64_t rows) const {
  return prepared && !active_recorder() && be.folds_norm(prepared.get(), rows);
}

void Linear::apply(Backend& be, const Tensor& x, Tensor& y, const Tensor* codes,
                   const FoldedNorm* fold) const {
  if (fold && !folds_norm(be, x.size(0))) return apply(be, be.unfold_norm(x, *fold), y, codes);
  const Tensor* b = bias.defined() ? &bias : nullptr;
  if (quantized()) {
    be.quantized_linear(x, quant.get(), prepared.get(), b, y, codes, fold);
    return;
  }
  if (ActivationRecorder* rec = active_recorder()) rec->on_input(weight.raw(), x);
  be.linear(x, weight, b, y);
}

std::vector<Tensor> Linear::split(Backend& be, const Tensor& x, std::span<const int64_t> widths,
                                  const Tensor* codes, const FoldedNorm* fold) const {
  if (fold && !folds_norm(be, x.size(0))) return split(be, be.unfold_norm(x, *fold), widths, codes);
  std::vector<Tensor> outs;
  std::vector<Tensor*> ptrs;
  outs.reserve(widths.size());
  for (int64_t w : widths) outs.push_back(be.empty({x.size(0), w}));
  for (Tensor& o : outs) ptrs.push_back(&o);
  if (quantized() && !active_recorder()) {
    be.quantized_linear_split(x, quant.get(), prepared.get(), bias.defined() ? &bias : nullptr,
                              ptrs, codes, fold);
    return outs;
  }
  if (active_recorder()) {  // the recorder sees the op whole
    be.split_columns((*this)(be, x), ptrs);
    return outs;
  }
  be.linear_split(x, weight, bias.defined() ? &bias : nullptr, ptrs);
  return outs;
}

Tensor Linear::silu_mul(Backend& be, const Tensor& x, const Tensor* codes,
                        const FoldedNorm* fold) const {
  if (fold && !folds_norm(be, x.size(0))) return silu_mul(be, be.unfold_norm(x, *fold), codes);
  Tensor act = be.empty({x.size(0), out_features() / 2});
  if (bias.defined() || active_recorder()) {
    Tensor both = be.empty({x.size(0), out_features()});
    apply(be, x, both, codes, fold);
    be.silu_mul(both, act);
    return act;
  }
  if (quantized()) {
    be.quantized_linear_silu_mul(x, quant.get(), prepared.get(), act, codes, fold);
    return act;
  }
  be.linear_silu_mul(x, weight, act);
  return act;
}

Result<Linear> Linear::load(Backend& be, const WeightStore& weights, const std::string& name,
                            int64_t out, int64_t in, bool with_bias) {
  Linear l;
  if (with_bias) {
    KITE_ASSIGN_OR_RETURN(l.bias, load_vector(be, weights, name + ".bias", out));
  }
  KITE_ASSIGN_OR_RETURN(std::optional<QuantizedWeight> stored,
                        load_checkpoint_linear(weights, name, out, in));
  if (stored) {
    l.quant = std::make_shared<const QuantizedWeight>(std::move(*stored));
    KITE_RETURN_IF_ERROR(place_quantized(be, name, l));
    return l;
  }
  if (load_dummy_quantized(be, weights, name, out, in, l)) return l;
  if (plain_load(weights, std::span<const std::string>(&name, 1))) {
    KITE_ASSIGN_OR_RETURN(l.weight, be.weight(weights, name + ".weight", {out, in}));
    return l;
  }
  KITE_ASSIGN_OR_RETURN(l.weight, weights.get_f32(name + ".weight", {out, in}));
  KITE_RETURN_IF_ERROR(finish_and_place(be, weights, {name}, {out}, l));
  return l;
}

Result<Linear> Linear::load_alias(Backend& be, const WeightStore& weights,
                                  const std::string& tensor, const std::string& key, int64_t out,
                                  int64_t in) {
  Linear l;
  if (load_dummy_quantized(be, weights, key, out, in, l)) return l;
  KITE_ASSIGN_OR_RETURN(l.weight, weights.get_f32(tensor, {out, in}));
  KITE_RETURN_IF_ERROR(finish_and_place(be, weights, {key}, {out}, l));
  return l;
}

Result<Linear> Linear::load_stacked(Backend& be, const WeightStore& weights,
                                    const std::vector<std::string>& names,
                                    const std::vector<int64_t>& outs, int64_t in, bool with_bias) {
  int64_t total = 0;
  for (int64_t o : outs) total += o;
  Linear l;
  if (with_bias) {
    Tensor b = Tensor::empty({total});
    int64_t row = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      KITE_ASSIGN_OR_RETURN(Tensor part, weights.get_f32(names[i] + ".bias", {outs[i]}));
      std::memcpy(b.data<float>() + row, part.data<float>(), part.size_bytes());
      row += outs[i];
    }
    l.bias = be.upload(b);
  }
  // A quantized checkpoint stores each part quantized: stack the parts' codes.
  std::vector<QuantizedWeight> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    KITE_ASSIGN_OR_RETURN(std::optional<QuantizedWeight> stored,
                          load_checkpoint_linear(weights, names[i], outs[i], in));
    if (stored) parts.push_back(std::move(*stored));
  }
  if (!parts.empty()) {
    if (parts.size() != names.size())
      return corrupt("'" + names[0] + "': some stacked parts are quantized and some are not");
    KITE_ASSIGN_OR_RETURN(QuantizedWeight stacked, stack_quantized_rows(parts));
    l.quant = std::make_shared<const QuantizedWeight>(std::move(stacked));
    KITE_RETURN_IF_ERROR(place_quantized(be, names[0], l));
    return l;
  }
  if (load_dummy_quantized(be, weights, names[0], total, in, l)) return l;
  if (plain_load(weights, names)) {
    std::vector<std::string> tensors;
    for (const std::string& n : names) tensors.push_back(n + ".weight");
    KITE_ASSIGN_OR_RETURN(l.weight, be.stacked_weight(weights, tensors, outs, in));
    return l;
  }
  l.weight = Tensor::empty({total, in});
  int64_t row = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    KITE_ASSIGN_OR_RETURN(Tensor part, weights.get_f32(names[i] + ".weight", {outs[i], in}));
    std::memcpy(l.weight.data<float>() + row * in, part.data<float>(), part.size_bytes());
    row += outs[i];
  }
  KITE_RETURN_IF_ERROR(finish_and_place(be, weights, names, outs, l));
  return l;
}

Result<Tensor> load_vector(Backend& be, const WeightStore& weights, const std::string& name,
                           int64_t size) {
  KITE_ASSIGN_OR_RETURN(Tensor v, weights.get_f32(name, {size}));
  // SmoothQuant / AWQ fold 1/s into the norm whose output feeds the smoothed linears.
  if (const QuantPlan* plan = weights.quant_plan()) {
    auto it = plan->norm_divisors.find(name);
    if (it != plan->norm_divisors.end() && static_cast<int64_t>(it->second.size()) == size)
      for (int64_t i = 0; i < size; ++i) v.f32()[i] /= it->second[i];
  }
  return be.upload(v);
}

}  // namespace kite
