// A residual-add + RMSNorm folded into the linear after it (FoldedNorm) on a backend
// whose kernels do not fold it (the CPU): Linear runs add_rms_norm first, so every form (one
// output, split, gated; plain and quantized) gives exactly the norm-then-linear result and the
// same residual.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "../kernels/kernel_test_util.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/layers/linear.h"
#include "quant/quantized_weight.h"

namespace kite {
namespace {

using testing::random_tensor;

std::vector<float> values(const Tensor& t) { return {t.f32().begin(), t.f32().end()}; }

TEST(LinearFold, WithoutAFoldingKernelTheNormRunsFirst) {
  std::mt19937 rng(7);
  std::shared_ptr<Backend> be = make_cpu_backend();
  const int64_t m = 2, k = 64, n = 48;
  for (const bool quantized : {false, true}) {
    SCOPED_TRACE(quantized ? "fp8 per channel" : "plain");
    Linear lin;
    const Tensor w = random_tensor({n, k}, rng, -0.2f, 0.2f);
    if (quantized)
      lin.quant = std::make_shared<QuantizedWeight>(quantize_fp8_per_channel(w));
    else
      lin.weight = w;
    EXPECT_FALSE(lin.folds_norm(*be, m));
    const Tensor x = random_tensor({m, k}, rng), res = random_tensor({m, k}, rng);
    const Tensor norm_w = random_tensor({k}, rng, 0.5f, 1.5f);

    Tensor res_want = res.clone(), h = Tensor::empty({m, k});
    be->add_rms_norm(res_want, x, norm_w, 1e-5f, h);
    // Each form applies the fold once: in place, then into another tensor (residual kept).
    for (const bool in_place : {true, false}) {
      SCOPED_TRACE(in_place ? "in place" : "residual_out apart");
      Tensor res_in, res_out;
      const FoldedNorm fold{&res_in, &res_out, &norm_w, 1e-5f};
      auto reset = [&] {
        res_in = res.clone();
        res_out = in_place ? res_in : Tensor::empty({m, k});
      };
      auto check_residual = [&] {
        EXPECT_EQ(values(res_out), values(res_want));
        if (!in_place) {
          EXPECT_EQ(values(res_in), values(res)) << "residual written";
        }
      };

      reset();
      Tensor want = Tensor::empty({m, n}), got = Tensor::empty({m, n});
      lin.apply(*be, h, want);
      lin.apply(*be, x, got, nullptr, &fold);
      EXPECT_EQ(values(got), values(want));
      check_residual();

      reset();
      const int64_t widths[] = {16, 32};
      const std::vector<Tensor> split_want = lin.split(*be, h, widths);
      const std::vector<Tensor> split_got = lin.split(*be, x, widths, nullptr, &fold);
      for (size_t p = 0; p < 2; ++p) EXPECT_EQ(values(split_got[p]), values(split_want[p]));
      check_residual();

      reset();
      EXPECT_EQ(values(lin.silu_mul(*be, x, nullptr, &fold)), values(lin.silu_mul(*be, h)));
      check_residual();
    }
  }
}

}  // namespace
}  // namespace kite
