#include "quant/quantized_weight.h"

#include <algorithm>
#include <cstring>

namespace kite {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Status expect(const Tensor& t, DType dtype, const Shape& shape, const char* what) {
  if (!t.defined() || t.dtype() != dtype || t.shape() != shape)
    return invalid_argument(
        std::string("quantized weight: ") + what + " must be " + std::string(dtype_name(dtype)) +
        " " + shape_to_string(shape) + ", got " +
        (t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_to_string(t.shape())
                     : std::string("nothing")));
  return ok_status();
}

}  // namespace

std::string_view quant_format_name(QuantFormat format) {
  switch (format) {
    case QuantFormat::kFp8PerChannel:
      return "fp8_per_channel";
    case QuantFormat::kFp8Block:
      return "fp8_block";
    case QuantFormat::kInt8PerChannel:
      return "int8_per_channel";
    case QuantFormat::kInt4Group:
      return "int4_group";
  }
  return "unknown";
}

int64_t QuantizedWeight::num_groups() const {
  if (format != QuantFormat::kInt4Group) return 0;
  return scales.defined() ? scales.size(1) : ceil_div(in_features, group_size);
}

Status QuantizedWeight::validate() const {
  const int64_t n = out_features, k = in_features;
  if (n <= 0 || k <= 0) return invalid_argument("quantized weight: empty shape");
  switch (format) {
    case QuantFormat::kFp8PerChannel:
      KITE_RETURN_IF_ERROR(expect(codes, DType::kF8E4M3, {n, k}, "codes"));
      KITE_RETURN_IF_ERROR(expect(scales, DType::kF32, {n}, "scales"));
      break;
    case QuantFormat::kFp8Block:
      KITE_RETURN_IF_ERROR(expect(codes, DType::kF8E4M3, {n, k}, "codes"));
      KITE_RETURN_IF_ERROR(expect(scales, DType::kF32,
                                  {ceil_div(n, block_rows), ceil_div(k, block_cols)}, "scales"));
      break;
    case QuantFormat::kInt8PerChannel:
      KITE_RETURN_IF_ERROR(expect(codes, DType::kI8, {n, k}, "codes"));
      KITE_RETURN_IF_ERROR(expect(scales, DType::kF32, {n}, "scales"));
      break;
    case QuantFormat::kInt4Group: {
      KITE_RETURN_IF_ERROR(expect(codes, DType::kU8, {n, ceil_div(k, 2)}, "codes"));
      if (!scales.defined() || scales.dim() != 2)
        return invalid_argument("quantized weight: int4 scales must be [out, groups]");
      const int64_t g = scales.size(1);
      KITE_RETURN_IF_ERROR(expect(scales, DType::kF32, {n, g}, "scales"));
      KITE_RETURN_IF_ERROR(expect(zeros, DType::kU8, {n, g}, "zeros"));
      if (g_idx.defined()) {
        KITE_RETURN_IF_ERROR(expect(g_idx, DType::kI32, {k}, "g_idx"));
        for (int32_t v : std::span(g_idx.data<int32_t>(), k))
          if (v < 0 || v >= g) return invalid_argument("quantized weight: g_idx out of range");
      } else if (g != ceil_div(k, group_size)) {
        return invalid_argument("quantized weight: int4 groups do not match group_size");
      }
      break;
    }
  }
  if (input_scale.defined())
    KITE_RETURN_IF_ERROR(expect(input_scale, DType::kF32, {k}, "input_scale"));
  return ok_status();
}

void QuantizedWeight::dequantize_rows(int64_t r0, int64_t r1, float* out) const {
  const int64_t k = in_features;
  const float* lut = fp8e4m3_table();
  const float* s = scales.data<float>();
  for (int64_t r = r0; r < r1; ++r) {
    float* o = out + (r - r0) * k;
    switch (format) {
      case QuantFormat::kFp8PerChannel: {
        const uint8_t* c = codes.data<uint8_t>() + r * k;
        for (int64_t i = 0; i < k; ++i) o[i] = lut[c[i]] * s[r];
        break;
      }
      case QuantFormat::kFp8Block: {
        const uint8_t* c = codes.data<uint8_t>() + r * k;
        const float* srow = s + (r / block_rows) * scales.size(1);
        for (int64_t i = 0; i < k; ++i) o[i] = lut[c[i]] * srow[i / block_cols];
        break;
      }
      case QuantFormat::kInt8PerChannel: {
        const int8_t* c = codes.data<int8_t>() + r * k;
        for (int64_t i = 0; i < k; ++i) o[i] = static_cast<float>(c[i]) * s[r];
        break;
      }
      case QuantFormat::kInt4Group: {
        const int64_t g = scales.size(1);
        const uint8_t* c = codes.data<uint8_t>() + r * ceil_div(k, 2);
        const uint8_t* z = zeros.data<uint8_t>() + r * g;
        const float* srow = s + r * g;
        const int32_t* gi = g_idx.defined() ? g_idx.data<int32_t>() : nullptr;
        for (int64_t i = 0; i < k; ++i) {
          const int q = (i & 1) ? (c[i >> 1] >> 4) : (c[i >> 1] & 0xF);
          const int64_t grp = gi ? gi[i] : i / group_size;
          o[i] = static_cast<float>(q - static_cast<int>(z[grp])) * srow[grp];
        }
        break;
      }
    }
  }
}

Tensor QuantizedWeight::dequantize() const {
  Tensor w = Tensor::empty({out_features, in_features});
  dequantize_rows(0, out_features, w.data<float>());
  return w;
}

int64_t QuantizedWeight::storage_bytes() const {
  int64_t b = static_cast<int64_t>(codes.size_bytes() + scales.size_bytes());
  if (zeros.defined()) b += static_cast<int64_t>(zeros.size_bytes());
  return b;
}

Result<QuantizedWeight> stack_quantized_rows(const std::vector<QuantizedWeight>& parts) {
  if (parts.empty()) return invalid_argument("stack_quantized_rows: no parts");
  const QuantizedWeight& first = parts[0];
  QuantizedWeight out = first;
  int64_t rows = 0;
  for (const QuantizedWeight& p : parts) {
    if (p.format != first.format || p.in_features != first.in_features ||
        p.group_size != first.group_size || p.num_groups() != first.num_groups() ||
        p.g_idx.defined() || p.input_scale.defined() != first.input_scale.defined())
      return invalid_argument("stack_quantized_rows: parts differ in format or geometry");
    if (p.input_scale.defined() &&
        std::memcmp(p.input_scale.raw(), first.input_scale.raw(), p.input_scale.size_bytes()))
      return invalid_argument("stack_quantized_rows: parts have different input scales");
    if (p.format == QuantFormat::kFp8Block &&
        (p.block_rows != first.block_rows || p.block_cols != first.block_cols ||
         p.out_features % p.block_rows != 0))
      return unsupported("stack_quantized_rows: fp8 block parts must be whole row blocks");
    rows += p.out_features;
  }
  auto stack = [&](auto member) {
    const Tensor& t0 = first.*member;
    Shape shape = t0.shape();
    shape[0] = 0;
    for (const QuantizedWeight& p : parts) shape[0] += (p.*member).size(0);
    Tensor t = Tensor::empty(shape, t0.dtype());
    size_t off = 0;
    for (const QuantizedWeight& p : parts) {
      const Tensor& src = p.*member;
      std::memcpy(static_cast<char*>(t.raw()) + off, src.raw(), src.size_bytes());
      off += src.size_bytes();
    }
    return t;
  };
  out.out_features = rows;
  out.codes = stack(&QuantizedWeight::codes);
  out.scales = stack(&QuantizedWeight::scales);
  if (first.zeros.defined()) out.zeros = stack(&QuantizedWeight::zeros);
  return out;
}

}  // namespace kite
