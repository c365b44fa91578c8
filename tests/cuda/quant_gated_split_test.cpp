// The quantized linear's fused outputs (kernels/cuda/quant/quant_linear.h): a gated MLP's
// silu(gate) * up in the same launch, and q / k / v written as separate outputs, each against
// the plain quantized linear.
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

// The gated FP8 / INT8 GEMV (a gated MLP's [gate; up] weight, silu(gate) * up in the same
// launch) against the plain quantized linear's F32 output put through silu * up on the host:
// the same sums, so only the final BF16 rounding differs (bound 5e-3). 8-bit M from 1 to 16 (at
// 1 and 2 both quantize the activations in-block; two token tiles past 8), INT4 up to 64 (the
// lean decode kernel's token
// tiles and groups, taken up to 32 rows by default: raised here); with and without input_scale.
TEST(CudaQuantLinear, SiluMulEqualsTheLinearThenSiluMul) {
  auto rng = test_rng();
  set_w4_decode_rows(64);
  // W4: I = 1408 gives gate and up tiles 88 apart with N_pad past 2I; K = 1000 a padded,
  // partial last group (the activations then go through the prep kernel).
  for (QuantFormat f :
       {QuantFormat::kFp8PerChannel, QuantFormat::kInt8PerChannel, QuantFormat::kInt4Group})
    for (const auto& [inter, k] : {std::pair<int64_t, int64_t>{256, 512}, {1408, 1000}})
      for (int64_t m : {1, 2, 3, 4, 8, 9, 16, 21, 32, 40, 64}) {
        if (m > 16 && f != QuantFormat::kInt4Group) continue;
        Tensor w = random_host({2 * inter, k}, rng, -0.05f, 0.05f);
        QuantizedWeight q = quantize_as(f, w);
        if (m % 2 == 0) q.input_scale = random_host({k}, rng, 0.25f, 4.0f);
        const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
        ASSERT_TRUE(quantized_silu_mul_applies(dw, m));
        Tensor x = random_host({m, k}, rng, -2.0f, 2.0f);
        round_to(x, DType::kBF16);
        const Tensor dx = upload(x, DType::kBF16);
        DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
        Tensor both = device_poisoned({m, 2 * inter}, DType::kF32);
        Tensor out = device_poisoned({m, inter}, DType::kBF16);
        quantized_linear(test_blas(), dx, dw, nullptr, both, ws.data(), ws.size_bytes(),
                         test_stream());
        quantized_linear_silu_mul(dx, dw, out, ws.data(), ws.size_bytes(), test_stream());
        EXPECT_LE(rel_error(download(out), silu_mul_ref(download(both), inter)), 5e-3)
            << quant_format_name(f) << " M=" << m << " I=" << inter << " K=" << k;
      }
  set_w4_decode_rows(32);
}

// Where the gated GEMV does not apply, it says so and the op refuses: FP8 block weights, more
// than 16 rows (8 with set_quant_bulk_rows(8); INT4: 32, and 8 off the lean decode kernel's
// group 128), I not a multiple of 8 (INT4: of 16).
TEST(CudaQuantLinear, SiluMulRefusesWhatItDoesNotTake) {
  auto rng = test_rng();
  const int64_t k = 256;
  const DeviceQuantizedWeight fp8 =
      upload_quantized(quantize_fp8_per_channel(random_host({512, k}, rng)), test_stream());
  const DeviceQuantizedWeight odd =
      upload_quantized(quantize_fp8_per_channel(random_host({2 * 100, k}, rng)), test_stream());
  const DeviceQuantizedWeight blk =
      upload_quantized(quantize_fp8_block(random_host({512, k}, rng), 128, 128), test_stream());
  const DeviceQuantizedWeight w4 =
      upload_quantized(quantize_int4_group(random_host({512, k}, rng), 128), test_stream());
  const DeviceQuantizedWeight w4_odd =
      upload_quantized(quantize_int4_group(random_host({2 * 40, k}, rng), 128), test_stream());
  const DeviceQuantizedWeight w4_g64 =
      upload_quantized(quantize_int4_group(random_host({512, k}, rng), 64), test_stream());
  EXPECT_TRUE(quantized_silu_mul_applies(fp8, 8));
  EXPECT_TRUE(quantized_silu_mul_applies(fp8, 3));
  EXPECT_TRUE(quantized_silu_mul_applies(fp8, 1));
  EXPECT_TRUE(quantized_silu_mul_applies(fp8, 9));
  EXPECT_TRUE(quantized_silu_mul_applies(fp8, 16));
  EXPECT_FALSE(quantized_silu_mul_applies(fp8, 17));
  set_quant_bulk_rows(8);  // KITE_CUDA_QBULK_ROWS=8
  EXPECT_FALSE(quantized_silu_mul_applies(fp8, 9));
  set_quant_bulk_rows(16);
  EXPECT_FALSE(quantized_silu_mul_applies(odd, 4));
  EXPECT_FALSE(quantized_silu_mul_applies(blk, 4));
  EXPECT_TRUE(quantized_silu_mul_applies(w4, 4));
  EXPECT_TRUE(quantized_silu_mul_applies(w4, 9));
  EXPECT_TRUE(quantized_silu_mul_applies(w4, 32));
  EXPECT_FALSE(quantized_silu_mul_applies(w4, 33));
  EXPECT_TRUE(quantized_silu_mul_applies(w4_g64, 8));
  EXPECT_FALSE(quantized_silu_mul_applies(w4_g64, 9));
  set_w4_decode_rows(8);  // KITE_CUDA_W4_DECODE_WIDE=0
  EXPECT_FALSE(quantized_silu_mul_applies(w4, 9));
  set_w4_decode_rows(32);
  EXPECT_FALSE(quantized_silu_mul_applies(w4_odd, 1));
  const Tensor x = device_empty({17, k}, DType::kBF16);
  Tensor out = device_empty({17, 256}, DType::kBF16);
  DeviceBuffer ws(quantized_linear_workspace_bytes(fp8, 17));
  EXPECT_THROW(quantized_linear_silu_mul(x, fp8, out, ws.data(), ws.size_bytes(), test_stream()),
               std::invalid_argument);
}

// Split outputs (q / k / v of one stacked weight): every format, the decode, tensor-core and
// bulk-copy kernels, and an M past decode sizes; the parts equal the whole output's columns
// exactly (the same kernel, only the stores differ). A bias rides along.
TEST(CudaQuantLinear, SplitOutputsEqualTheWholeOutput) {
  auto rng = test_rng();
  const int64_t widths[] = {192, 64, 44};
  const int64_t n = 300, k = 1000;
  for (QuantFormat f : {QuantFormat::kInt4Group, QuantFormat::kFp8PerChannel,
                        QuantFormat::kInt8PerChannel, QuantFormat::kFp8Block})
    for (int path : {1, 2, 3})
      for (int64_t m : {1, 5, 8, 12, 16, 64}) {
        if (m == 64 && f != QuantFormat::kInt4Group) continue;  // the cuBLASLt routes: below
        const QuantizedWeight q = quantize_as(f, random_host({n, k}, rng, -0.05f, 0.05f));
        const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
        Tensor x = random_host({m, k}, rng);
        round_to(x, DType::kBF16);
        const Tensor dx = upload(x, DType::kBF16);
        Tensor b = random_host({n}, rng);
        round_to(b, DType::kBF16);
        const Tensor db = upload(b, DType::kBF16);
        DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
        ASSERT_TRUE(quantized_split_applies(dw, m, 3));
        set_quant_decode_override(path);
        Tensor whole = device_poisoned({m, n}, DType::kBF16);
        quantized_linear(test_blas(), dx, dw, &db, whole, ws.data(), ws.size_bytes(),
                         test_stream());
        std::vector<Tensor> parts;
        for (int64_t w : widths) parts.push_back(device_poisoned({m, w}, DType::kBF16));
        Tensor* ptrs[] = {&parts[0], &parts[1], &parts[2]};
        quantized_linear_split(test_blas(), dx, dw, &db, ptrs, ws.data(), ws.size_bytes(),
                               test_stream());
        set_quant_decode_override(0);
        const Tensor h = download(whole);
        int64_t col0 = 0;
        for (size_t s = 0; s < parts.size(); ++s) {
          const Tensor part = download(parts[s]);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < widths[s]; ++j)
              ASSERT_EQ(part.data<float>()[i * widths[s] + j], h.data<float>()[i * n + col0 + j])
                  << quant_format_name(f) << " path " << path << " M=" << m << " part " << s;
          col0 += widths[s];
        }
      }
  // The cuBLASLt routes (FP8 / INT8 per channel beyond 16 rows, INT4 beyond 128) take no split
  // outputs.
  const DeviceQuantizedWeight fp8 = upload_quantized(
      quantize_fp8_per_channel(random_host({n, k}, rng, -0.05f, 0.05f)), test_stream());
  EXPECT_FALSE(quantized_split_applies(fp8, 32, 3));
  EXPECT_TRUE(quantized_split_applies(fp8, 32, 1));
  const DeviceQuantizedWeight int8 = upload_quantized(
      quantize_int8_per_channel(random_host({n, k}, rng, -0.05f, 0.05f)), test_stream());
  EXPECT_FALSE(quantized_split_applies(int8, 32, 3));
  const DeviceQuantizedWeight int4 = upload_quantized(
      quantize_int4_group(random_host({n, k}, rng, -0.05f, 0.05f), 128), test_stream());
  EXPECT_TRUE(quantized_split_applies(int4, 128, 3));
  EXPECT_FALSE(quantized_split_applies(int4, 129, 3));
}

}  // namespace
}  // namespace kite::cuda
