#include "kernels/backend.h"

#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include "kernels/cpu/cpu_backend.h"
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

void Backend::rope_and_cache(Tensor* q, int64_t q_rot_offset, Tensor& k, int64_t k_rot_offset,
                             const Tensor* v, Tensor& k_cache, Tensor* v_cache, int64_t rot_dim,
                             ops::RopeStyle style) {
  if (q) rope(*q, q_rot_offset, rot_dim, style);
  rope(k, k_rot_offset, rot_dim, style);
  write_cache(k, k_cache);
  if (v) write_cache(*v, *v_cache);
}

void Backend::moe_experts(const Tensor& x, const Tensor& router_logits,
                          const ops::MoeRoutingParams& params, const Tensor& gate_up,
                          const Tensor& down, Tensor& out) {
  const int64_t t = x.size(0), d = x.size(1), k = params.top_k;
  const int64_t num_experts = gate_up.size(0), inter = down.size(2);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  moe_route(router_logits, params, ids, weights);

  // Group (token, weight) pairs by expert, in expert order (as transformers accumulates them):
  // one gather puts every routed row in that order, each expert runs on its contiguous slice,
  // and its output is scatter-added back with the routing weights.
  std::vector<int32_t> count(num_experts, 0), offset(num_experts + 1, 0);
  for (int32_t e : ids) {
    if (e < 0 || e >= num_experts) throw std::runtime_error("moe: router chose a bad expert");
    ++count[e];
  }
  for (int64_t e = 0; e < num_experts; ++e) offset[e + 1] = offset[e] + count[e];
  std::vector<int32_t> rows(ids.size());
  std::vector<float> row_weights(ids.size());
  std::vector<int32_t> fill(offset.begin(), offset.end() - 1);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[i * k + j];
      rows[fill[e]] = static_cast<int32_t>(i);
      row_weights[fill[e]++] = weights[i * k + j];
    }
  Tensor rows_t = index(rows);
  Tensor weights_t = floats(row_weights);
  Tensor routed = empty({static_cast<int64_t>(rows.size()), d});
  gather_rows(x, rows_t, routed);

  Tensor acc = zeros({t, d}, DType::kF32);
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t n = count[e];
    if (n == 0) continue;
    Tensor gu = empty({n, 2 * inter});
    linear(routed.slice_rows(offset[e], offset[e + 1]),
           gate_up.slice_rows(e, e + 1).view({2 * inter, d}), nullptr, gu);
    Tensor act = empty({n, inter});
    silu_mul(gu, act);
    Tensor ye = empty({n, d});
    linear(act, down.slice_rows(e, e + 1).view({d, inter}), nullptr, ye);
    scatter_add_rows(acc, ye, rows_t.slice_rows(offset[e], offset[e + 1]),
                     weights_t.slice_rows(offset[e], offset[e + 1]));
  }
  convert(acc, out);
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
      return unsupported("this kite binary was built without the CUDA backend "
                         "(build with -DKITE_CUDA=ON: tools/cuda/build.sh)");
    factory = it->second;
  }
  return factory();
}

Result<Device> parse_device(std::string_view name, bool cuda_usable) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  if (name == "auto") return cuda_usable ? Device::kCuda : Device::kCpu;
  return invalid_argument("unknown device '" + std::string(name) + "' (expected auto, cpu or cuda)");
}

std::string_view device_name(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

}  // namespace kite
