#include "kernels/backend.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/quant_ops.h"
#include "model/weight_store.h"

namespace kite {

Result<Tensor> Backend::weight(const WeightStore& store, const std::string& name,
                               const Shape& shape) {
  KITE_ASSIGN_OR_RETURN(Tensor host, store.get_f32(name, shape));
  return upload(host);
}

Result<Tensor> Backend::stacked_weight(const WeightStore& store,
                                       const std::vector<std::string>& names,
                                       const std::vector<int64_t>& outs, int64_t in) {
  int64_t total = 0;
  for (int64_t o : outs) total += o;
  Tensor host = Tensor::empty({total, in});
  int64_t row = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    KITE_ASSIGN_OR_RETURN(Tensor part, store.get_f32(names[i], {outs[i], in}));
    std::memcpy(host.data<float>() + row * in, part.data<float>(), part.size_bytes());
    row += outs[i];
  }
  return upload(host);
}

Tensor Backend::unfold_norm(const Tensor& x, const FoldedNorm& fold) {
  Tensor h = empty(x.shape(), x.dtype());
  Tensor& res = *fold.residual_out;
  if (res.raw() != fold.residual->raw()) copy_columns(*fold.residual, 0, res, 0, res.size(-1));
  add_rms_norm(res, x, *fold.weight, fold.eps, h);
  return h;
}

void Backend::quantized_linear(const Tensor& x, const QuantizedWeight* host, const void*,
                               const Tensor* bias, Tensor& y, const Tensor*,
                               const FoldedNorm* fold) {
  if (!host) throw std::invalid_argument("quantized_linear: this backend needs the host form");
  if (fold)
    throw std::invalid_argument("quantized_linear: " + name() +
                                " folds no norm into a linear (folds_norm is false)");
  ops::quantized_linear(x, *host, bias, y);  // from x itself: no backend here makes codes
}

void Backend::add_rms_norm_codes(Tensor&, const Tensor&, const Tensor&, float, Tensor&, const void*,
                                 Tensor&) {
  throw std::logic_error("add_rms_norm_codes: " + name() +
                         " makes no activation codes (norm_activation_codes_bytes is 0)");
}

void Backend::linear_split(const Tensor& x, const Tensor& weight, const Tensor* bias,
                           std::span<Tensor* const> outs) {
  if (outs.empty()) throw std::invalid_argument("linear_split: no outputs");
  const int64_t m = x.numel() / weight.size(1);
  Tensor y = empty({m, weight.size(0)}, outs[0]->dtype());
  linear(x, weight, bias, y);
  split_columns(y, outs);  // checks that the outputs' widths add up to the weight's rows
}

void Backend::split_columns(const Tensor& y, std::span<Tensor* const> outs) {
  int64_t col = 0;
  for (const Tensor* out : outs) col += out->size(-1);
  if (col != y.size(-1))
    throw std::invalid_argument("split_columns: outputs have " + std::to_string(col) +
                                " columns, y " + std::to_string(y.size(-1)));
  col = 0;
  for (Tensor* out : outs) {
    copy_columns(y, col, *out, 0, out->size(-1));
    col += out->size(-1);
  }
}

void Backend::quantized_linear_split(const Tensor& x, const QuantizedWeight* host,
                                     const void* prepared, const Tensor* bias,
                                     std::span<Tensor* const> outs, const Tensor* codes,
                                     const FoldedNorm* fold) {
  if (outs.empty()) throw std::invalid_argument("quantized_linear_split: no outputs");
  int64_t width = 0;
  for (const Tensor* out : outs) width += out->size(-1);
  const int64_t m = outs[0]->numel() / std::max<int64_t>(1, outs[0]->size(-1));
  Tensor y = empty({m, width}, outs[0]->dtype());
  quantized_linear(x, host, prepared, bias, y, codes, fold);
  split_columns(y, outs);
}

void Backend::rms_norm_prefix(Tensor& x, int64_t width, const Tensor& weight, float eps) {
  if (x.dim() < 1 || width <= 0 || width > x.size(-1) || weight.numel() != width)
    throw std::invalid_argument("rms_norm_prefix: width " + std::to_string(width) +
                                " must be in [1, " + std::to_string(x.dim() ? x.size(-1) : 0) +
                                "] and match the weight's " + std::to_string(weight.numel()) +
                                " values");
  const int64_t rows = x.numel() / x.size(-1);
  Tensor part = empty({rows, width}, x.dtype());
  copy_columns(x, 0, part, 0, width);
  rms_norm(part, weight, eps, part);
  copy_columns(part, 0, x, 0, width);
}

void Backend::rope_cache_attention(Tensor& q, Tensor& k, const Tensor& v, Tensor& k_cache,
                                   Tensor& v_cache, int64_t rot_dim, ops::RopeStyle style,
                                   float scale, Tensor& out) {
  rope_and_cache(&q, 0, k, 0, &v, k_cache, &v_cache, rot_dim, style);
  attention(q, k_cache, v_cache, scale, out);
}

void Backend::linear_silu_mul(const Tensor& x, const Tensor& gate_up, Tensor& out) {
  const int64_t m = x.numel() / gate_up.size(1);
  Tensor both = empty({m, gate_up.size(0)}, out.dtype());
  linear(x, gate_up, nullptr, both);
  silu_mul(both, out);
}

void Backend::quantized_linear_silu_mul(const Tensor& x, const QuantizedWeight* host,
                                        const void* prepared, Tensor& out, const Tensor* codes,
                                        const FoldedNorm* fold) {
  Tensor both = empty({out.numel() / out.size(-1), 2 * out.size(-1)}, out.dtype());
  quantized_linear(x, host, prepared, nullptr, both, codes, fold);
  silu_mul(both, out);
}

void Backend::moe_experts(const Tensor&, const Tensor&, const ops::MoeRoutingParams&, const Tensor&,
                          const Tensor&, Tensor&) {
  throw std::logic_error(name() + " backend: MoE runs per expert (layers/moe) on this backend");
}

namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<Device, BackendFactory>& registry() {
  static std::map<Device, BackendFactory> r{
      {Device::kCpu, []() -> Result<std::shared_ptr<Backend>> { return make_cpu_backend(); }}};
  return r;
}

}  // namespace

void register_backend(Device device, BackendFactory factory) {
  std::lock_guard lock(registry_mutex());
  registry()[device] = std::move(factory);
}

bool has_backend(Device device) {
  std::lock_guard lock(registry_mutex());
  return registry().count(device) > 0;
}

Result<std::shared_ptr<Backend>> create_backend(Device device) {
  BackendFactory factory;
  {
    std::lock_guard lock(registry_mutex());
    auto it = registry().find(device);
    if (it == registry().end())
      return unsupported(
          "this kite binary was built without the CUDA backend "
          "(build with -DKITE_CUDA=ON: tools/cuda/build.sh)");
    factory = it->second;
  }
  return factory();
}

Result<Device> parse_device(std::string_view name, bool cuda_usable) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  if (name == "auto") return cuda_usable ? Device::kCuda : Device::kCpu;
  return invalid_argument("unknown device '" + std::string(name) +
                          "' (expected auto, cpu or cuda)");
}

std::string_view device_name(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

}  // namespace kite
