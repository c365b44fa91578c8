// Activation codes made by the norm before an FP8 / INT8 per-channel linear (add_rms_norm with
// NormActivationCodes; quant_linear.h's ready codes): the same residual, output, codes and
// linear output, bit for bit, as add_rms_norm followed by the linear quantizing x itself.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/quant/quant_activation.h"
#include "kernels/cuda/quant/quant_linear.h"
#include "quant/quantized_weight.h"
#include "quant_test_util.h"

namespace kite::cuda {
namespace {

using namespace testing;

std::vector<uint8_t> download_bytes(const void* p, size_t n) {
  std::vector<uint8_t> out(n);
  KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
  KITE_CUDA_CHECK(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost));
  return out;
}

struct CodesCase {
  QuantFormat format;
  int64_t m, n, k;
  int path;  // set_quant_decode_override: 0 automatic, 4 the bulk GEMV on codes
  bool smooth;
};

// Cases where the linear reads codes: INT8 on the bulk GEMV at 3-16 rows (a kernel made them
// before), FP8 there forced onto codes (path 4), both past 16 rows on cuBLASLt; K = 1000 leaves
// the codes' padding to the norm (zeros from 1000 to 1024); input_scale (SmoothQuant).
TEST(CudaNormCodes, NormCodesEqualTheLinearsOwn) {
  auto rng = test_rng();
  const CodesCase cases[] = {
      {QuantFormat::kInt8PerChannel, 12, 256, 1024, 0, false},
      {QuantFormat::kInt8PerChannel, 16, 320, 1000, 0, true},
      {QuantFormat::kInt8PerChannel, 3, 128, 4096, 0, false},
      {QuantFormat::kFp8PerChannel, 12, 256, 1024, 4, false},
      {QuantFormat::kFp8PerChannel, 40, 256, 1024, 0, false},
      {QuantFormat::kInt8PerChannel, 40, 192, 2048, 0, true},
  };
  for (const CodesCase& c : cases) {
    SCOPED_TRACE(std::string(quant_format_name(c.format)) + " M=" + std::to_string(c.m) +
                 " K=" + std::to_string(c.k) + " path " + std::to_string(c.path) +
                 (c.smooth ? " input_scale" : ""));
    QuantizedWeight q = quantize_as(c.format, random_host({c.n, c.k}, rng, -0.05f, 0.05f));
    if (c.smooth) q.input_scale = random_host({c.k}, rng, 0.25f, 4.0f);
    const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
    set_quant_decode_override(c.path);
    ASSERT_TRUE(quantized_linear_reads_activation_codes(dw, c.m));

    Tensor x = random_host({c.m, c.k}, rng, -2.0f, 2.0f);
    Tensor res = random_host({c.m, c.k}, rng, -2.0f, 2.0f);
    Tensor w = random_host({c.k}, rng, 0.5f, 1.5f);
    x.data<float>()[c.k / 3] = 40.0f;  // an outlier sets row 0's scale
    for (Tensor* t : {&x, &res, &w}) round_to(*t, DType::kBF16);
    const Tensor dx = upload(x, DType::kBF16), dw_norm = upload(w, DType::kBF16);

    // The norm, then the linear quantizing its input itself.
    Tensor res_a = upload(res, DType::kBF16), h_a = device_poisoned({c.m, c.k}, DType::kBF16);
    add_rms_norm(res_a, dx, dw_norm, 1e-6f, h_a, test_stream());
    DeviceBuffer ws(quantized_linear_workspace_bytes(dw, c.m));
    Tensor y_a = device_poisoned({c.m, c.n}, DType::kBF16);
    quantized_linear(test_blas(), h_a, dw, nullptr, y_a, ws.data(), ws.size_bytes(), test_stream());
    // The activation kernel's codes of h_a, for the codes themselves.
    DeviceBuffer want(activation_codes_bytes(dw, c.m));
    const NormActivationCodes wc = norm_activation_codes(dw, c.m, want.data());
    launch_act_quant_token(wc.int8, static_cast<const __nv_bfloat16*>(h_a.raw()), c.m, c.k, wc.ldq,
                           wc.input_scale, wc.q, wc.scale, test_stream());

    // The norm making the codes, then the linear reading them.
    Tensor res_b = upload(res, DType::kBF16), h_b = device_poisoned({c.m, c.k}, DType::kBF16);
    DeviceBuffer codes(activation_codes_bytes(dw, c.m));
    KITE_CUDA_CHECK(cudaMemset(codes.data(), 0xA5, codes.size_bytes()));  // poison
    const NormActivationCodes nc = norm_activation_codes(dw, c.m, codes.data());
    add_rms_norm(res_b, dx, dw_norm, 1e-6f, h_b, test_stream(), &nc);
    Tensor y_b = device_poisoned({c.m, c.n}, DType::kBF16);
    quantized_linear(test_blas(), h_b, dw, nullptr, y_b, ws.data(), ws.size_bytes(), test_stream(),
                     codes.data());
    set_quant_decode_override(0);

    EXPECT_EQ(count_unequal(download(res_a), download(res_b)), 0);
    EXPECT_EQ(count_unequal(download(h_a), download(h_b)), 0);
    EXPECT_EQ(download_bytes(want.data(), want.size_bytes()),
              download_bytes(codes.data(), codes.size_bytes()));
    EXPECT_EQ(count_unequal(download(y_a), download(y_b)), 0);
  }
}

// The gated form (silu(gate) * up) reads the norm's codes too, bit for bit its own.
TEST(CudaNormCodes, GatedLinearReadsTheNormsCodes) {
  auto rng = test_rng();
  const int64_t m = 12, inter = 192, k = 1024;
  const QuantizedWeight q =
      quantize_as(QuantFormat::kInt8PerChannel, random_host({2 * inter, k}, rng, -0.05f, 0.05f));
  const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
  ASSERT_TRUE(quantized_silu_mul_applies(dw, m));
  ASSERT_TRUE(quantized_linear_reads_activation_codes(dw, m));
  Tensor x = random_host({m, k}, rng, -2.0f, 2.0f), res = random_host({m, k}, rng, -2.0f, 2.0f);
  Tensor w = random_host({k}, rng, 0.5f, 1.5f);
  for (Tensor* t : {&x, &res, &w}) round_to(*t, DType::kBF16);
  const Tensor dx = upload(x, DType::kBF16), dw_norm = upload(w, DType::kBF16);
  Tensor res_d = upload(res, DType::kBF16), h = device_poisoned({m, k}, DType::kBF16);
  DeviceBuffer codes(activation_codes_bytes(dw, m));
  const NormActivationCodes nc = norm_activation_codes(dw, m, codes.data());
  add_rms_norm(res_d, dx, dw_norm, 1e-6f, h, test_stream(), &nc);
  DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
  Tensor own = device_poisoned({m, inter}, DType::kBF16);
  Tensor ready = device_poisoned({m, inter}, DType::kBF16);
  quantized_linear_silu_mul(h, dw, own, ws.data(), ws.size_bytes(), test_stream());
  quantized_linear_silu_mul(h, dw, ready, ws.data(), ws.size_bytes(), test_stream(), codes.data());
  EXPECT_EQ(count_unequal(download(own), download(ready)), 0);
}

// Codes handed to a linear that does not read them (one row: the bulk GEMV quantizes in every
// block; FP8 at 12 rows on a small weight: BF16 x; INT4) are a caller's mistake, not silently
// ignored; a norm's codes need BF16 rows.
TEST(CudaNormCodes, RejectsCodesWhereTheLinearReadsNone) {
  auto rng = test_rng();
  for (const auto& [f, m] : {std::pair{QuantFormat::kInt8PerChannel, int64_t{1}},
                             std::pair{QuantFormat::kInt4Group, int64_t{4}},
                             std::pair{QuantFormat::kFp8PerChannel, int64_t{12}}}) {
    const DeviceQuantizedWeight dw = upload_quantized(
        quantize_as(f, random_host({128, 512}, rng, -0.05f, 0.05f)), test_stream());
    EXPECT_FALSE(quantized_linear_reads_activation_codes(dw, m));
    const Tensor x = device_poisoned({m, 512}, DType::kBF16);
    Tensor y = device_poisoned({m, 128}, DType::kBF16);
    DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m)), codes(activation_codes_bytes(dw, m));
    EXPECT_THROW(quantized_linear(test_blas(), x, dw, nullptr, y, ws.data(), ws.size_bytes(),
                                  test_stream(), codes.data()),
                 std::invalid_argument);
  }
  const DeviceQuantizedWeight dw = upload_quantized(
      quantize_as(QuantFormat::kInt8PerChannel, random_host({64, 256}, rng)), test_stream());
  Tensor x = device_poisoned({12, 256}, DType::kF32), res = device_poisoned({12, 256}, DType::kF32);
  Tensor w = device_poisoned({256}, DType::kF32), out = device_poisoned({12, 256}, DType::kF32);
  DeviceBuffer codes(activation_codes_bytes(dw, 12));
  const NormActivationCodes nc = norm_activation_codes(dw, 12, codes.data());
  EXPECT_THROW(add_rms_norm(res, x, w, 1e-6f, out, test_stream(), &nc), std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
