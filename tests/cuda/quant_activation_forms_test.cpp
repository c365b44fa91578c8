// How the FP8 / INT8 decode GEMV gets its activations (kernels/cuda/quant/quant_linear.h): the
// bulk GEMV's in-block quantization against the activation kernel's codes, and FP8 with BF16
// activations (W8A16) against the host's dequantized weight.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/quant/quant_linear.h"
#include "kernels/quant_ops.h"
#include "quant/quantized_weight.h"
#include "quant_test_util.h"

namespace kite::cuda {
namespace {

using namespace testing;

// The bulk GEMV's in-block activation quantization (M <= 2, FP8 / INT8 per channel) gives the
// separate kernel's codes and scales, so the same output bit for bit: with and without
// input_scale, K a multiple of 64 or not, K within the rows held in registers (<= 16,384) and
// past them (20,000: read twice), both output dtypes.
TEST(CudaQuantLinear, InBlockActivationQuantizationEqualsTheKernel) {
  auto rng = test_rng();
  for (QuantFormat f : {QuantFormat::kFp8PerChannel, QuantFormat::kInt8PerChannel})
    for (int64_t m : {1, 2})
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{300, 1000}, {512, 14336}, {64, 20000}})
        for (bool smooth : {false, true}) {
          Tensor w = random_host({n, k}, rng, -0.05f, 0.05f);
          QuantizedWeight q = quantize_as(f, w);
          if (smooth) q.input_scale = random_host({k}, rng, 0.25f, 4.0f);
          const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
          Tensor x = random_host({m, k}, rng);
          x.data<float>()[k / 3] = 9.0f;  // an outlier sets the scale
          round_to(x, DType::kBF16);
          const Tensor dx = upload(x, DType::kBF16);
          DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
          for (DType out : {DType::kF32, DType::kBF16}) {
            Tensor y3 = device_poisoned({m, n}, out), y4 = device_poisoned({m, n}, out);
            quantized_linear_on_path(3, dx, dw, y3, ws);
            quantized_linear_on_path(4, dx, dw, y4, ws);
            EXPECT_EQ(count_unequal(download(y3), download(y4)), 0)
                << quant_format_name(f) << " M=" << m << " N=" << n << " K=" << k
                << (smooth ? " input_scale" : "");
          }
        }
}

// FP8 per channel at M <= 16 with BF16 activations (path 5, W8A16: the E4M3 codes and x turned
// into f16 in the lanes, no activation quantization) against the host's dequantized weight
// times x in double: within f32 rounding, while the W8A8 form (path 3) carries E4M3's
// activation error, at least ten times larger, so the test fails if path 5 quantized x. An
// activation of ~1e5, past f16's range, must come through (x is scaled into it). Plain (both
// output dtypes; 12 and 16 rows on the kernel's two token tiles) and gated. The automatic path
// takes W8A16 from two rows and W8A8 at one, bit for bit. Where W8A16 does not apply (K not whole
// 64-channel chunks, input_scale), path 5 gives path 3's output bit for bit.
TEST(CudaQuantLinear, Fp8WithBf16ActivationsMatchesTheDequantizedWeight) {
  auto rng = test_rng();
  for (int64_t m : {1, 2, 4, 8, 12, 16})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{300, 1024}, {512, 14336}}) {
      const QuantizedWeight q = quantize_fp8_per_channel(random_host({n, k}, rng, -0.05f, 0.05f));
      const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
      Tensor x = random_host({m, k}, rng, -2.0f, 2.0f);
      x.data<float>()[k / 3] = 300.0f;  // an outlier: W8A8's scale follows it, W8A16 has none
      if (n == 300) x.data<float>()[(m - 1) * k + k / 5] = -1.0e5f;  // past f16's 65,504
      round_to(x, DType::kBF16);
      const Tensor dx = upload(x, DType::kBF16);
      const Tensor ref = linear_ref(x, q.dequantize(), nullptr);
      DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
      for (DType out : {DType::kF32, DType::kBF16}) {
        Tensor y5 = device_poisoned({m, n}, out), y3 = device_poisoned({m, n}, out);
        quantized_linear_on_path(5, dx, dw, y5, ws);
        quantized_linear_on_path(3, dx, dw, y3, ws);
        Tensor y0 = device_poisoned({m, n}, out);
        quantized_linear_on_path(0, dx, dw, y0, ws);
        const Tensor a0 = download(y0), want0 = download(m >= 2 ? y5 : y3);
        int64_t differ = 0;
        for (int64_t i = 0; i < m * n; ++i)
          differ += std::memcmp(a0.data<float>() + i, want0.data<float>() + i, 4) != 0;
        EXPECT_EQ(differ, 0) << "automatic path, M=" << m << " N=" << n;
        const double e5 = rel_error(download(y5), ref), e3 = rel_error(download(y3), ref);
        EXPECT_LE(e5, out == DType::kF32 ? 1e-5 : 4e-3) << "M=" << m << " N=" << n << " K=" << k;
        if (out == DType::kF32) {
          EXPECT_GE(e3, 10 * e5) << "M=" << m << " N=" << n << " K=" << k;
        }
      }
    }
  // Gated: silu(x Wg^T) * (x Wu^T) in BF16.
  for (int64_t m : {1, 2, 8, 13}) {
    const int64_t inter = 256, k = 2048;
    const QuantizedWeight q =
        quantize_fp8_per_channel(random_host({2 * inter, k}, rng, -0.05f, 0.05f));
    const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
    Tensor x = random_host({m, k}, rng, -2.0f, 2.0f);
    x.data<float>()[k / 3] = 300.0f;
    round_to(x, DType::kBF16);
    const Tensor dx = upload(x, DType::kBF16);
    const Tensor ref = silu_mul_ref(linear_ref(x, q.dequantize(), nullptr), inter);
    DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
    Tensor y5 = device_poisoned({m, inter}, DType::kBF16);
    Tensor y3 = device_poisoned({m, inter}, DType::kBF16);
    set_quant_decode_override(5);
    quantized_linear_silu_mul(dx, dw, y5, ws.data(), ws.size_bytes(), test_stream());
    set_quant_decode_override(3);
    quantized_linear_silu_mul(dx, dw, y3, ws.data(), ws.size_bytes(), test_stream());
    set_quant_decode_override(0);
    const double e5 = rel_error(download(y5), ref), e3 = rel_error(download(y3), ref);
    // The BF16 output's rounding is most of both errors here (H200: 0.0018 against 0.0062).
    EXPECT_LE(e5, 3e-3) << "gated M=" << m;
    EXPECT_GE(e3, 2 * e5) << "gated M=" << m;
  }
  // The rule as the library states it: from two rows to the bulk GEMV's sixteen (past eight only
  // on weights of at most 64 Mi elements), FP8 per channel only, K whole 64-channel chunks, no
  // input_scale.
  {
    auto up = [&](QuantFormat f, int64_t k, bool smooth) {
      QuantizedWeight q = quantize_as(f, random_host({64, k}, rng, -0.05f, 0.05f));
      if (smooth) q.input_scale = random_host({k}, rng, 0.25f, 4.0f);
      return upload_quantized(q, test_stream());
    };
    const DeviceQuantizedWeight fp8 = up(QuantFormat::kFp8PerChannel, 512, false);
    EXPECT_FALSE(quantized_linear_reads_bf16_activations(fp8, 1));
    for (int64_t m = 2; m <= 16; ++m) EXPECT_TRUE(quantized_linear_reads_bf16_activations(fp8, m));
    EXPECT_FALSE(quantized_linear_reads_bf16_activations(fp8, 17));
    const DeviceQuantizedWeight wide =  // 16,384 x 4,160: 68 M elements, past 64 Mi
        dummy_quantized(QuantFormat::kFp8PerChannel, 16384, 4160, 1, test_stream());
    EXPECT_TRUE(quantized_linear_reads_bf16_activations(wide, 8));
    EXPECT_FALSE(quantized_linear_reads_bf16_activations(wide, 9));
    EXPECT_FALSE(
        quantized_linear_reads_bf16_activations(up(QuantFormat::kFp8PerChannel, 1000, false), 2));
    EXPECT_FALSE(
        quantized_linear_reads_bf16_activations(up(QuantFormat::kFp8PerChannel, 512, true), 2));
    EXPECT_FALSE(
        quantized_linear_reads_bf16_activations(up(QuantFormat::kInt8PerChannel, 512, false), 2));
    set_quant_decode_override(5);
    EXPECT_TRUE(quantized_linear_reads_bf16_activations(fp8, 1));
    set_quant_decode_override(3);
    EXPECT_FALSE(quantized_linear_reads_bf16_activations(fp8, 2));
    set_quant_decode_override(0);
  }
  // Not applicable: K = 1000 (not whole chunks) and input_scale fall back to the in-block
  // quantization, so path 5 equals path 3 exactly.
  for (bool smooth : {false, true}) {
    const int64_t m = 1, n = 128, k = smooth ? 1024 : 1000;
    QuantizedWeight q = quantize_fp8_per_channel(random_host({n, k}, rng, -0.05f, 0.05f));
    if (smooth) q.input_scale = random_host({k}, rng, 0.25f, 4.0f);
    const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
    Tensor x = random_host({m, k}, rng);
    round_to(x, DType::kBF16);
    const Tensor dx = upload(x, DType::kBF16);
    DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
    Tensor y5 = device_poisoned({m, n}, DType::kF32), y3 = device_poisoned({m, n}, DType::kF32);
    quantized_linear_on_path(5, dx, dw, y5, ws);
    quantized_linear_on_path(3, dx, dw, y3, ws);
    EXPECT_EQ(count_unequal(download(y5), download(y3)), 0)
        << (smooth ? "input_scale" : "K = 1000");
  }
}

}  // namespace
}  // namespace kite::cuda
