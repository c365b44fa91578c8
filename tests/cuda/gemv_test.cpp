// Every decode GEMV kernel (gemm/gemv.h: warp per row, bulk copy, and kAuto's choice) against a
// float64 reference on random inputs: all M in [1, 8], N not a multiple of the tile's rows,
// K shorter than one step / not a multiple of the chunk / several chunks, bias, F32 output,
// and the split-output form (q, k, v of one stacked weight written to three tensors).
#include "kernels/cuda/gemm/gemv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace kite::cuda {
namespace {

using namespace testing;

struct GemvCase {
  GemvKernel kernel;
  int64_t m, k;
  std::vector<int64_t> widths;  // output segments; N is their sum
  bool bias;
  DType out;
};

std::string kernel_label(GemvKernel k) {
  switch (k) {
    case GemvKernel::kAuto:
      return "auto";
    case GemvKernel::kWarpPerRow:
      return "warp";
    case GemvKernel::kBulk:
      return "bulk";
  }
  return "?";
}

class CudaGemvTest : public ::testing::TestWithParam<GemvCase> {};

TEST_P(CudaGemvTest, MatchesFloat64Reference) {
  const GemvCase c = GetParam();
  int64_t n = 0;
  for (int64_t w : c.widths) n += w;
  auto rng = test_rng();
  Tensor x = random_host({c.m, c.k}, rng);
  Tensor w = random_host({n, c.k}, rng, -0.1f, 0.1f);
  Tensor b = random_host({n}, rng);
  round_to(x, DType::kBF16);
  round_to(w, DType::kBF16);
  round_to(b, c.out);
  const Tensor ref = linear_ref(x, w, c.bias ? &b : nullptr);
  const Tensor dx = upload(x, DType::kBF16), dw = upload(w, DType::kBF16), db = upload(b, c.out);
  std::vector<Tensor> ys;
  for (int64_t width : c.widths) ys.push_back(device_poisoned({c.m, width}, c.out));
  std::vector<Tensor*> yp;
  for (Tensor& y : ys) yp.push_back(&y);
  const int64_t saved_rows = gemv_rows();
  set_gemv_rows(kGemvMaxRows);  // every M the kernels take, not only what linear() sends
  const bool applies = gemv_applies(dx, dw, ys[0]);
  set_gemv_rows(saved_rows);
  ASSERT_TRUE(applies);
  const GemvKernel saved = gemv_kernel();
  set_gemv_kernel(c.kernel);
  gemv_split(dx, dw, c.bias ? &db : nullptr, yp, c.m, test_stream());
  set_gemv_kernel(saved);
  // Reassemble [M, N] from the segments, in feature order.
  Tensor got = Tensor::empty({c.m, n});
  int64_t col0 = 0;
  for (size_t s = 0; s < ys.size(); ++s) {
    const Tensor part = download(ys[s]);
    const int64_t width = c.widths[s];
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < width; ++j)
        got.data<float>()[i * n + col0 + j] = part.data<float>()[i * width + j];
    col0 += width;
  }
  KITE_EXPECT_CLOSE(got, ref, c.out == DType::kBF16 ? kTolBF16 : 1e-3);
}

std::vector<GemvCase> cases() {
  std::vector<GemvCase> out;
  for (GemvKernel kernel : {GemvKernel::kAuto, GemvKernel::kWarpPerRow, GemvKernel::kBulk}) {
    out.push_back({kernel, 1, 4096, {1000}, false, DType::kBF16});
    out.push_back({kernel, 2, 8, {13}, true, DType::kF32});      // K of one vector
    out.push_back({kernel, 3, 4104, {77}, true, DType::kBF16});  // chunk + a tail
    out.push_back({kernel, 4, 9000, {40}, false, DType::kF32});  // several chunks
    out.push_back({kernel, 5, 1024, {129}, true, DType::kBF16});
    out.push_back({kernel, 6, 256, {300}, false, DType::kBF16});
    out.push_back({kernel, 7, 2056, {31}, true, DType::kF32});
    out.push_back({kernel, 8, 2048, {2048}, false, DType::kBF16});
    out.push_back({kernel, 1, 1024, {512, 128, 128}, true, DType::kBF16});  // q / k / v
    out.push_back({kernel, 8, 4096, {256, 64, 64}, false, DType::kF32});
    out.push_back({kernel, 1, 2048, {3000}, false, DType::kBF16});  // more groups than SMs
  }
  // kAuto's bulk kernel at M = 1 (>= kGemvBulkMinBytes of weights) and its warp kernel at M = 2.
  out.push_back({GemvKernel::kAuto, 1, 4096, {4096, 1024, 1024}, true, DType::kBF16});
  out.push_back({GemvKernel::kAuto, 2, 4096, {6144}, false, DType::kBF16});
  out.push_back({GemvKernel::kAuto, 1, 4096, {4096}, false, DType::kBF16});  // Llama's o
  return out;
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaGemvTest, ::testing::ValuesIn(cases()), [](const auto& info) {
  const GemvCase& c = info.param;
  return kernel_label(c.kernel) + "_m" + std::to_string(c.m) + "_k" + std::to_string(c.k) + "_seg" +
         std::to_string(c.widths.size()) + "_" + std::to_string(info.index);
});

// The fused SwiGLU input (gemv_silu_mul): y = silu(x Wg^T) * (x Wu^T) for W = [Wg; Wu],
// against the float64 reference of both halves; the bulk kernel forced (every M) and kAuto's
// own choice at M = 1 on a weight big enough for it.
struct GatedCase {
  GemvKernel kernel;
  int64_t m, inter, k;
  DType out;
};

class CudaGemvSiluMulTest : public ::testing::TestWithParam<GatedCase> {};

TEST_P(CudaGemvSiluMulTest, MatchesFloat64Reference) {
  const GatedCase c = GetParam();
  auto rng = test_rng();
  Tensor x = random_host({c.m, c.k}, rng);
  Tensor w = random_host({2 * c.inter, c.k}, rng, -0.1f, 0.1f);
  round_to(x, DType::kBF16);
  round_to(w, DType::kBF16);
  const Tensor both = linear_ref(x, w, nullptr);
  Tensor ref = Tensor::empty({c.m, c.inter});
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.inter; ++j) {
      const double g = both.data<float>()[i * 2 * c.inter + j];
      const double u = both.data<float>()[i * 2 * c.inter + c.inter + j];
      ref.data<float>()[i * c.inter + j] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  const Tensor dx = upload(x, DType::kBF16), dw = upload(w, DType::kBF16);
  Tensor y = device_poisoned({c.m, c.inter}, c.out);
  const GemvKernel saved = gemv_kernel();
  const int64_t saved_rows = gemv_rows();
  set_gemv_kernel(c.kernel);
  set_gemv_rows(kGemvMaxRows);
  const bool applies = gemv_silu_mul_applies(dx, dw, y);
  if (applies) gemv_silu_mul(dx, dw, y, c.m, test_stream());
  set_gemv_kernel(saved);
  set_gemv_rows(saved_rows);
  ASSERT_TRUE(applies);
  KITE_EXPECT_CLOSE(download(y), ref, c.out == DType::kBF16 ? kTolBF16 : 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, CudaGemvSiluMulTest,
    ::testing::Values(GatedCase{GemvKernel::kBulk, 1, 1000, 4096, DType::kBF16},
                      GatedCase{GemvKernel::kBulk, 2, 3, 8, DType::kF32},  // one vector of K
                      GatedCase{GemvKernel::kBulk, 3, 77, 4104, DType::kBF16},
                      GatedCase{GemvKernel::kBulk, 5, 130, 9000, DType::kF32},
                      GatedCase{GemvKernel::kBulk, 8, 2048, 1024, DType::kBF16},
                      GatedCase{GemvKernel::kBulk, 1, 2049, 2048, DType::kBF16},
                      GatedCase{GemvKernel::kAuto, 1, 5120, 4096, DType::kBF16}),
    [](const auto& info) {
      const GatedCase& c = info.param;
      return kernel_label(c.kernel) + "_m" + std::to_string(c.m) + "_i" + std::to_string(c.inter) +
             "_k" + std::to_string(c.k);
    });

}  // namespace
}  // namespace kite::cuda
