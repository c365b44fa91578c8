// The CUDA backend's helper kernels (backend/row_ops.h) and the per-head linear
// (gemm/head_linear.h) against plain host loops on random inputs, outputs poisoned first.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/backend/row_ops.h"
#include "kernels/cuda/gemm/head_linear.h"

namespace kite::cuda {
namespace {

using namespace testing;

TEST(CudaRowOps, GatherRowsMatchesHostCopy) {
  auto rng = test_rng();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const int64_t rows = 37, width = 200, n = 53;
    Tensor x = random_host({rows, width}, rng);
    round_to(x, dt);
    std::vector<int32_t> idx(n);
    for (auto& r : idx) r = static_cast<int32_t>(rng() % rows);
    Tensor ref = Tensor::empty({n, width});
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(x.data<float>() + idx[i] * width, width, ref.data<float>() + i * width);
    Tensor out = device_poisoned({n, width}, dt);
    gather_rows(upload(x, dt), to_device(idx, {n}, test_stream()), out, test_stream());
    KITE_EXPECT_CLOSE(download(out), ref, kTolF32);
  }
}

TEST(CudaRowOps, ScatterAddRowsAccumulatesWeightedRowsInFp32) {
  auto rng = test_rng();
  const int64_t tokens = 29, width = 96, n = 17;
  Tensor acc = random_host({tokens, width}, rng);
  Tensor y = random_host({n, width}, rng);
  round_to(y, DType::kBF16);
  Tensor w = random_host({n}, rng, 0.0f, 2.0f);
  std::vector<int32_t> rows(tokens);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(n);  // distinct, as the op requires
  Tensor ref = acc.clone();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < width; ++c)
      ref.data<float>()[rows[i] * width + c] += w.data<float>()[i] * y.data<float>()[i * width + c];
  Tensor out = upload(acc, DType::kF32);
  scatter_add_rows(out, upload(y, DType::kBF16), to_device(rows, {n}, test_stream()),
                   upload(w, DType::kF32), test_stream());
  KITE_EXPECT_CLOSE(download(out), ref, kTolF32);
}

TEST(CudaRowOps, AddAndConvertAcrossDtypes) {
  auto rng = test_rng();
  Tensor a = random_host({1000}, rng), b = random_host({1000}, rng);
  round_to(b, DType::kBF16);
  Tensor sum = a.clone();
  for (int64_t i = 0; i < 1000; ++i) sum.data<float>()[i] += b.data<float>()[i];
  Tensor out = device_poisoned({1000}, DType::kBF16);
  Tensor db = upload(b, DType::kBF16);
  add_convert(upload(a, DType::kF32), &db, out, test_stream());
  KITE_EXPECT_CLOSE(download(out), sum, kTolBF16);
  Tensor conv = device_poisoned({1000}, DType::kBF16);
  add_convert(upload(a, DType::kF32), nullptr, conv, test_stream());
  KITE_EXPECT_CLOSE(download(conv), a, kTolBF16);
}

TEST(CudaHeadLinear, MatchesPerHeadHostProducts) {
  auto rng = test_rng();
  BlasLtContext& ctx = test_blas();
  HeadLinear op;
  // MLA-like strided slices: x [T, H, xw] using dims [x_off, x_off + k); y [T, H, yw] writing
  // [y_off, y_off + n). Up to 4 BF16 rows take the per-head GEMV (head_gemv), more cuBLASLt;
  // the last two shapes are DeepSeek-V2-Lite's absorbed projections.
  struct Shape5 {
    int64_t t, heads, xw, x_off, k, yw, y_off, n;
  };
  const Shape5 shapes[] = {{7, 4, 48, 0, 32, 80, 0, 64},
                           {1, 4, 48, 8, 32, 80, 16, 64},
                           {3, 5, 40, 0, 40, 24, 3, 20},
                           {4, 2, 16, 8, 8, 9, 0, 9},
                           {1, 16, 192, 0, 128, 576, 0, 512},
                           {2, 16, 512, 0, 512, 128, 0, 128},
                           // rows past the GEMV's registers-before-pdl_wait part (512 values)
                           {2, 3, 1600, 16, 1544, 40, 8, 24}};
  for (const Shape5& s : shapes) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(::testing::Message() << "T=" << s.t << " H=" << s.heads << " K=" << s.k
                                        << " N=" << s.n << " " << dtype_name(dt));
      const int64_t t = s.t, heads = s.heads, xw = s.xw, k = s.k, yw = s.yw, n = s.n;
      Tensor x = random_host({t, heads, xw}, rng);
      Tensor w = random_host({heads, n, k}, rng, -0.2f, 0.2f);
      round_to(x, dt);
      round_to(w, dt);
      Tensor ref = Tensor::empty({t, heads, n});
      for (int64_t i = 0; i < t; ++i)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t o = 0; o < n; ++o) {
            double acc = 0;
            for (int64_t c = 0; c < k; ++c)
              acc += double(x.data<float>()[(i * heads + h) * xw + s.x_off + c]) *
                     w.data<float>()[(h * n + o) * k + c];
            ref.data<float>()[(i * heads + h) * n + o] = static_cast<float>(acc);
          }
      Tensor y = device_poisoned({t, heads, yw}, dt);
      op.run(ctx, upload(x, dt), s.x_off, upload(w, dt), y, s.y_off, test_stream());
      Tensor got = download(y);
      Tensor cols = Tensor::empty({t, heads, n});
      for (int64_t r = 0; r < t * heads; ++r)
        std::copy_n(got.data<float>() + r * yw + s.y_off, n, cols.data<float>() + r * n);
      KITE_EXPECT_CLOSE(cols, ref, dt == DType::kBF16 ? kTolBF16 : 1e-4);
    }
  }
}

}  // namespace
}  // namespace kite::cuda
