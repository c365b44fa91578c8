#include "quant/checkpoint_formats.h"

#include <cstring>

#include "quant/quant_plan.h"

namespace kite {
namespace {

constexpr int kAwqNibbleColumn[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // nibble i -> column 8c + [i]

Result<Tensor> get_typed(const WeightStore& w, const std::string& name, DType dtype,
                         const Shape& shape) {
  KITE_ASSIGN_OR_RETURN(TensorInfo info, w.info(name));
  if (info.dtype != dtype || info.shape != shape)
    return corrupt("tensor '" + name + "' is " + std::string(dtype_name(info.dtype)) + " " +
                   shape_to_string(info.shape) + " but this quantization layout needs " +
                   std::string(dtype_name(dtype)) + " " + shape_to_string(shape) + " (file " +
                   info.file + ")");
  return w.get_raw(name);
}

// Scales stored as F16/BF16/F32 [rows, cols] -> F32 of the same shape.
Result<Tensor> get_scales(const WeightStore& w, const std::string& name, const Shape& shape) {
  KITE_ASSIGN_OR_RETURN(TensorInfo info, w.info(name));
  if (info.shape != shape && !(shape.size() == 1 && info.shape == Shape{shape[0], 1}))
    return corrupt("tensor '" + name + "' has shape " + shape_to_string(info.shape) +
                   " but the layout needs " + shape_to_string(shape) + " (file " + info.file + ")");
  KITE_ASSIGN_OR_RETURN(Tensor t, w.get_f32(name, info.shape));
  return t.view(shape);
}

int nibble(uint32_t word, int i) { return static_cast<int>((word >> (4 * i)) & 0xF); }

void set_code(QuantizedWeight& q, int64_t n, int64_t k, int code) {
  uint8_t& byte = q.codes.data<uint8_t>()[n * ((q.in_features + 1) / 2) + k / 2];
  byte = (k & 1) ? static_cast<uint8_t>((byte & 0x0F) | (code << 4))
                 : static_cast<uint8_t>((byte & 0xF0) | code);
}

Result<QuantizedWeight> load_awq(const WeightStore& w, const std::string& name, int64_t out,
                                 int64_t in, int64_t g) {
  if (out % 8 != 0)
    return corrupt("AWQ linear '" + name + "' has " + std::to_string(out) +
                   " outputs, not a multiple of 8");
  // A partial last group (in % g != 0) is a kite extension: ceil(in / g) rows of zeros/scales.
  const int64_t groups = (in + g - 1) / g;
  KITE_ASSIGN_OR_RETURN(Tensor qw, get_typed(w, name + ".qweight", DType::kI32, {in, out / 8}));
  KITE_ASSIGN_OR_RETURN(Tensor qz, get_typed(w, name + ".qzeros", DType::kI32, {groups, out / 8}));
  KITE_ASSIGN_OR_RETURN(Tensor sc, get_scales(w, name + ".scales", {groups, out}));
  QuantizedWeight q = empty_int4_group(out, in, g);
  const auto* qwd = qw.data<uint32_t>();
  const auto* qzd = qz.data<uint32_t>();
  for (int64_t k = 0; k < in; ++k)
    for (int64_t c = 0; c < out / 8; ++c)
      for (int i = 0; i < 8; ++i)
        set_code(q, 8 * c + kAwqNibbleColumn[i], k, nibble(qwd[k * (out / 8) + c], i));
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t c = 0; c < out / 8; ++c)
      for (int i = 0; i < 8; ++i) {
        const int64_t n = 8 * c + kAwqNibbleColumn[i];
        q.zeros.data<uint8_t>()[n * groups + gi] =
            static_cast<uint8_t>(nibble(qzd[gi * (out / 8) + c], i));
        q.scales.f32()[n * groups + gi] = sc.f32()[gi * out + n];
      }
  return q;
}

Result<QuantizedWeight> load_gptq(const WeightStore& w, const std::string& name, int64_t out,
                                  int64_t in, int64_t group_size) {
  const int64_t g = group_size == -1 ? in : group_size;
  if (out % 8 != 0 || in % 8 != 0)
    return corrupt("GPTQ linear '" + name + "' needs multiples of 8 inputs and outputs");
  const int64_t groups = (in + g - 1) / g;
  KITE_ASSIGN_OR_RETURN(Tensor qw, get_typed(w, name + ".qweight", DType::kI32, {in / 8, out}));
  KITE_ASSIGN_OR_RETURN(Tensor qz, get_typed(w, name + ".qzeros", DType::kI32, {groups, out / 8}));
  KITE_ASSIGN_OR_RETURN(Tensor sc, get_scales(w, name + ".scales", {groups, out}));
  QuantizedWeight q = empty_int4_group(out, in, g);
  const auto* qwd = qw.data<uint32_t>();
  const auto* qzd = qz.data<uint32_t>();
  for (int64_t r = 0; r < in / 8; ++r)
    for (int64_t n = 0; n < out; ++n)
      for (int j = 0; j < 8; ++j) set_code(q, n, 8 * r + j, nibble(qwd[r * out + n], j));
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t n = 0; n < out; ++n) {
      // v1 checkpoints store zero - 1 (a historical off-by-one kept for compatibility).
      const int z = (nibble(qzd[gi * (out / 8) + n / 8], static_cast<int>(n % 8)) + 1) & 0xF;
      q.zeros.data<uint8_t>()[n * groups + gi] = static_cast<uint8_t>(z);
      q.scales.f32()[n * groups + gi] = sc.f32()[gi * out + n];
    }
  if (w.contains(name + ".g_idx")) {
    KITE_ASSIGN_OR_RETURN(Tensor gidx, get_typed(w, name + ".g_idx", DType::kI32, {in}));
    bool trivial = true;
    for (int64_t k = 0; k < in; ++k) {
      const int32_t v = gidx.data<int32_t>()[k];
      if (v < 0 || v >= groups)
        return corrupt("tensor '" + name + ".g_idx' names group " + std::to_string(v) +
                       " outside the " + std::to_string(groups) + " groups");
      trivial = trivial && v == k / g;
    }
    if (!trivial) q.g_idx = gidx.clone();  // act-order: the permuted group map
  }
  return q;
}

Result<QuantizedWeight> load_per_channel(const WeightStore& w, const std::string& name, DType dtype,
                                         int64_t out, int64_t in) {
  QuantizedWeight q;
  q.format = dtype == DType::kI8 ? QuantFormat::kInt8PerChannel : QuantFormat::kFp8PerChannel;
  q.out_features = out;
  q.in_features = in;
  KITE_ASSIGN_OR_RETURN(Tensor codes, get_typed(w, name + ".weight", dtype, {out, in}));
  q.codes = codes;
  KITE_ASSIGN_OR_RETURN(q.scales, get_scales(w, name + ".weight_scale", {out}));
  return q;
}

Result<QuantizedWeight> load_fp8_block(const WeightStore& w, const std::string& name, int64_t out,
                                       int64_t in, int64_t br, int64_t bc) {
  QuantizedWeight q;
  q.format = QuantFormat::kFp8Block;
  q.out_features = out;
  q.in_features = in;
  q.block_rows = br;
  q.block_cols = bc;
  KITE_ASSIGN_OR_RETURN(q.codes, get_typed(w, name + ".weight", DType::kF8E4M3, {out, in}));
  KITE_ASSIGN_OR_RETURN(q.scales, get_scales(w, name + ".weight_scale_inv",
                                             {(out + br - 1) / br, (in + bc - 1) / bc}));
  return q;
}

}  // namespace

Result<std::optional<QuantizedWeight>> load_checkpoint_linear(const WeightStore& w,
                                                              const std::string& name, int64_t out,
                                                              int64_t in) {
  if (w.is_dummy()) return std::optional<QuantizedWeight>();
  const QuantPlan* plan = w.quant_plan();
  const CheckpointQuantConfig ckpt = plan ? plan->checkpoint : CheckpointQuantConfig{};
  Result<QuantizedWeight> q = invalid_argument("unset");
  if (w.contains(name + ".qweight")) {
    if (ckpt.kind == CheckpointQuant::kAwq)
      q = load_awq(w, name, out, in, ckpt.group_size == -1 ? in : ckpt.group_size);
    else if (ckpt.kind == CheckpointQuant::kGptq)
      q = load_gptq(w, name, out, in, ckpt.group_size);
    else
      return unsupported("tensor '" + name +
                         ".qweight' is packed INT4 but config.json declares "
                         "no awq or gptq quantization_config");
  } else if (w.contains(name + ".weight_scale")) {
    KITE_ASSIGN_OR_RETURN(TensorInfo info, w.info(name + ".weight"));
    if (info.dtype != DType::kI8 && info.dtype != DType::kF8E4M3)
      return unsupported("tensor '" + name + ".weight' has a weight_scale but dtype " +
                         std::string(dtype_name(info.dtype)) + " (expected I8 or F8_E4M3)");
    q = load_per_channel(w, name, info.dtype, out, in);
  } else if (plan && plan->keep_fp8_block && w.contains(name + ".weight_scale_inv")) {
    q = load_fp8_block(w, name, out, in, plan->fp8_block_rows, plan->fp8_block_cols);
  } else {
    return std::optional<QuantizedWeight>();
  }
  if (!q.ok()) return q.status();
  if (w.contains(name + ".input_smooth_inv")) {
    KITE_ASSIGN_OR_RETURN(q->input_scale, w.get_f32(name + ".input_smooth_inv", {in}));
  }
  KITE_RETURN_IF_ERROR(q->validate().with_context("tensor '" + name + "'"));
  return std::optional<QuantizedWeight>(std::move(*q));
}

}  // namespace kite
