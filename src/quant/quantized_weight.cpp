#include "quant/quantized_weight.h"

#include <algorithm>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kite {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Channels [i0, i1) of one INT4 row of packed codes c (channel i in the low nibble of byte i / 2
// when i is even, the high one when odd), all in one group: o[i] = (q_i - zero) * scale, the value
// every kernel decodes (the integer difference is exact in fp32, then one rounding). The CPU
// quantized linear decodes every weight of every step this way, so it is vectorised (16
// channels a step); a loop per channel with a division for the group index took 81 % of an INT4
// decode step on kite-tiny.
void decode_int4_run(const uint8_t* c, int64_t i0, int64_t i1, int zero, float scale, float* o) {
  auto one = [&](int64_t i) {
    const int q = (i & 1) ? (c[i >> 1] >> 4) : (c[i >> 1] & 0xF);
    o[i] = static_cast<float>(q - zero) * scale;
  };
  int64_t i = i0;
  if (i < i1 && (i & 1)) one(i++);
#if defined(__AVX2__)
  const __m256i z = _mm256_set1_epi32(zero), low4 = _mm256_set1_epi32(0xF);
  const __m256 s = _mm256_set1_ps(scale);
  for (; i + 16 <= i1; i += 16) {
    int64_t bytes;  // channels i .. i + 15
    std::memcpy(&bytes, c + (i >> 1), 8);
    const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
    const __m256i lo = _mm256_sub_epi32(_mm256_and_si256(v, low4), z);  // even channels
    const __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(v, 4), z);    // odd channels
    // unpack interleaves within 128-bit halves: a = channels 0-3 | 8-11, b = 4-7 | 12-15.
    const __m256i a = _mm256_unpacklo_epi32(lo, hi), b = _mm256_unpackhi_epi32(lo, hi);
    const __m256i first = _mm256_permute2x128_si256(a, b, 0x20);
    const __m256i second = _mm256_permute2x128_si256(a, b, 0x31);
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_cvtepi32_ps(first), s));
    _mm256_storeu_ps(o + i + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(second), s));
  }
#endif
  for (; i < i1; ++i) one(i);
}

// o[i] = table[c[i]] * scale for i in [i0, i1): FP8 E4M3 codes, table their decode table.
// Vectorised without the table: the code's exponent and mantissa bits moved to fp32's (a float
// of exponent field e and mantissa m / 8) times 2^120 is the E4M3 value exactly, subnormals
// included (e = 0 is an fp32 subnormal, scaled exactly into range: this needs the default
// floating-point mode, without denormals-are-zero); the NaN codes (0x7F, 0xFF)
// are put back as the table's NaN (then signed like the rest). A gather from the table was
// slower (Qwen2.5-0.5B FP8 decode on the dev machine: 82 against 75 ms a step).
void decode_fp8_run(const uint8_t* c, int64_t i0, int64_t i1, const float* table, float scale,
                    float* o) {
  int64_t i = i0;
#if defined(__AVX2__)
  const __m256 s = _mm256_set1_ps(scale), pow120 = _mm256_set1_ps(0x1p120f);
  const __m256 nan = _mm256_set1_ps(table[0x7F]);
  const __m256i mag = _mm256_set1_epi32(0x7F), sign = _mm256_set1_epi32(0x80);
  for (; i + 8 <= i1; i += 8) {
    int64_t bytes;
    std::memcpy(&bytes, c + i, 8);
    const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
    const __m256i em = _mm256_and_si256(v, mag);
    __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(em, 20)), pow120);
    f = _mm256_blendv_ps(f, nan, _mm256_castsi256_ps(_mm256_cmpeq_epi32(em, mag)));
    f = _mm256_or_ps(f, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(v, sign), 24)));
    _mm256_storeu_ps(o + i, _mm256_mul_ps(f, s));
  }
#endif
  for (; i < i1; ++i) o[i] = table[c[i]] * scale;
}

// o[i] = c[i] * scale for INT8 codes.
void decode_int8_run(const int8_t* c, int64_t k, float scale, float* o) {
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= k; i += 8) {
    int64_t bytes;
    std::memcpy(&bytes, c + i, 8);
    const __m256i v = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes));
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), s));
  }
#endif
  for (; i < k; ++i) o[i] = static_cast<float>(c[i]) * scale;
}

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
      case QuantFormat::kFp8PerChannel:
        decode_fp8_run(codes.data<uint8_t>() + r * k, 0, k, lut, s[r], o);
        break;
      case QuantFormat::kFp8Block: {
        const uint8_t* c = codes.data<uint8_t>() + r * k;
        const float* srow = s + (r / block_rows) * scales.size(1);
        for (int64_t b = 0; b * block_cols < k; ++b)
          decode_fp8_run(c, b * block_cols, std::min(k, (b + 1) * block_cols), lut, srow[b], o);
        break;
      }
      case QuantFormat::kInt8PerChannel:
        decode_int8_run(codes.data<int8_t>() + r * k, k, s[r], o);
        break;
      case QuantFormat::kInt4Group: {
        const int64_t g = scales.size(1);
        const uint8_t* c = codes.data<uint8_t>() + r * ceil_div(k, 2);
        const uint8_t* z = zeros.data<uint8_t>() + r * g;
        const float* srow = s + r * g;
        if (g_idx.defined()) {  // act order: each channel's own group
          const int32_t* gi = g_idx.data<int32_t>();
          for (int64_t i = 0; i < k; ++i) decode_int4_run(c, i, i + 1, z[gi[i]], srow[gi[i]], o);
        } else {
          for (int64_t grp = 0; grp < g; ++grp)
            decode_int4_run(c, grp * group_size, std::min(k, (grp + 1) * group_size), z[grp],
                            srow[grp], o);
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
