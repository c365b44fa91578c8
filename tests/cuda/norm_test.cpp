#include <gtest/gtest.h>

#include <stdexcept>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"

namespace kite::cuda {
namespace {

using namespace testing;

struct NormCase {
  DType dtype;
  int64_t rows, hidden;
};

class CudaNormTest : public ::testing::TestWithParam<NormCase> {};

TEST_P(CudaNormTest, RmsNormMatchesCpu) {
  const NormCase c = GetParam();
  auto rng = test_rng();
  Tensor x = random_host({c.rows, c.hidden}, rng, -2.0f, 2.0f);
  Tensor w = random_host({c.hidden}, rng, 0.5f, 1.5f);
  round_to(x, c.dtype);
  round_to(w, c.dtype);
  Tensor ref = Tensor::empty(x.shape());
  ops::rms_norm(x, w, 1e-6f, ref);

  Tensor dx = upload(x, c.dtype), dw = upload(w, c.dtype);
  Tensor out = device_poisoned(x.shape(), c.dtype);
  rms_norm(dx, dw, 1e-6f, out, test_stream());
  KITE_EXPECT_CLOSE(download(out), ref, tolerance(c.dtype));

  // In place (out aliases x), as the CPU op allows.
  rms_norm(dx, dw, 1e-6f, dx, test_stream());
  KITE_EXPECT_CLOSE(download(dx), ref, tolerance(c.dtype));
}

TEST_P(CudaNormTest, AddRmsNormMatchesCpu) {
  const NormCase c = GetParam();
  auto rng = test_rng();
  Tensor x = random_host({c.rows, c.hidden}, rng, -2.0f, 2.0f);
  Tensor res = random_host({c.rows, c.hidden}, rng, -2.0f, 2.0f);
  Tensor w = random_host({c.hidden}, rng, 0.5f, 1.5f);
  round_to(x, c.dtype);
  round_to(res, c.dtype);
  round_to(w, c.dtype);
  Tensor dx = upload(x, c.dtype), dres = upload(res, c.dtype), dw = upload(w, c.dtype);

  Tensor ref = Tensor::empty(x.shape());
  Tensor ref_res = res.clone();
  ops::add_rms_norm(ref_res, x, w, 1e-6f, ref);

  Tensor out = device_poisoned(x.shape(), c.dtype);
  add_rms_norm(dres, dx, dw, 1e-6f, out, test_stream());
  KITE_EXPECT_CLOSE(download(out), ref, tolerance(c.dtype));
  KITE_EXPECT_CLOSE(download(dres), ref_res, tolerance(c.dtype));

  // out aliasing x is allowed.
  Tensor dres2 = upload(res, c.dtype);
  add_rms_norm(dres2, dx, dw, 1e-6f, dx, test_stream());
  KITE_EXPECT_CLOSE(download(dx), ref, tolerance(c.dtype));
}

// 4096/7168: Llama and DeepSeek-V3 hidden sizes (vector path); 100 and 8: scalar fallback and
// a row smaller than one warp's work.
INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaNormTest,
    ::testing::Values(NormCase{DType::kF32, 7, 4096}, NormCase{DType::kBF16, 7, 4096},
                      NormCase{DType::kF32, 3, 7168}, NormCase{DType::kBF16, 33, 7168},
                      NormCase{DType::kF32, 5, 100}, NormCase{DType::kBF16, 5, 100},
                      NormCase{DType::kBF16, 64, 8}, NormCase{DType::kF32, 1, 256}),
    [](const auto& info) {
      return dtype_label(info.param.dtype) + "_" + std::to_string(info.param.rows) + "x" +
             std::to_string(info.param.hidden);
    });

// rms_norm_prefix: MLA's latent row (576 = 512 normalised + 64 rope dims; vector path), a
// width not a multiple of the vector (scalar path), the whole row; against ops::rms_norm on
// the leading columns, the rest untouched.
TEST(CudaNorm, RmsNormPrefixMatchesCpu) {
  auto rng = test_rng();
  struct Case {
    DType dtype;
    int64_t rows, cols, width;
  };
  for (const Case c : {Case{DType::kBF16, 5, 576, 512}, Case{DType::kF32, 1, 576, 512},
                       Case{DType::kF32, 4, 80, 64}, Case{DType::kBF16, 3, 13, 7},
                       Case{DType::kBF16, 2, 64, 64}}) {
    SCOPED_TRACE(dtype_label(c.dtype) + " " + std::to_string(c.rows) + "x" +
                 std::to_string(c.cols) + " width " + std::to_string(c.width));
    Tensor x = random_host({c.rows, c.cols}, rng, -2.0f, 2.0f);
    Tensor w = random_host({c.width}, rng, 0.5f, 1.5f);
    round_to(x, c.dtype);
    round_to(w, c.dtype);
    Tensor lead = Tensor::empty({c.rows, c.width});
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.width; ++j)
        lead.data<float>()[r * c.width + j] = x.data<float>()[r * c.cols + j];
    Tensor ref_lead = Tensor::empty(lead.shape());
    ops::rms_norm(lead, w, 1e-6f, ref_lead);
    Tensor ref = x.clone();
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.width; ++j)
        ref.data<float>()[r * c.cols + j] = ref_lead.data<float>()[r * c.width + j];

    Tensor dx = upload(x, c.dtype), dw = upload(w, c.dtype);
    rms_norm_prefix(dx, c.width, dw, 1e-6f, test_stream());
    KITE_EXPECT_CLOSE(download(dx), ref, tolerance(c.dtype));
  }
  Tensor x = device_empty({2, 64}, DType::kF32);
  Tensor w = device_empty({65}, DType::kF32);
  EXPECT_THROW(rms_norm_prefix(x, 65, w, 1e-6f, test_stream()), std::invalid_argument);
  Tensor w32 = device_empty({32}, DType::kF32);
  EXPECT_THROW(rms_norm_prefix(x, 31, w32, 1e-6f, test_stream()), std::invalid_argument);
}

TEST(CudaNorm, RejectsBadShapesAndAliasing) {
  Tensor x = device_empty({2, 64}, DType::kF32);
  Tensor w_bad = device_empty({63}, DType::kF32);
  Tensor w = device_empty({64}, DType::kF32);
  Tensor w_bf16 = device_empty({64}, DType::kBF16);
  Tensor out = device_empty({2, 64}, DType::kF32);
  EXPECT_THROW(rms_norm(x, w_bad, 1e-6f, out, test_stream()), std::invalid_argument);
  EXPECT_THROW(rms_norm(x, w_bf16, 1e-6f, out, test_stream()), std::invalid_argument);
  Tensor res = device_empty({2, 64}, DType::kF32);
  EXPECT_THROW(add_rms_norm(res, x, w, 1e-6f, res, test_stream()), std::invalid_argument);
  Tensor host = Tensor::empty({2, 64});
  EXPECT_THROW(rms_norm(host, w, 1e-6f, out, test_stream()), std::invalid_argument);
}

}  // namespace
}  // namespace kite::cuda
