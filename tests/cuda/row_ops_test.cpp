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

// Host reference of one column block: dst[r, dst_off + c] = src[r, src_off + c].
void copy_block_ref(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                    int64_t cols) {
  const int64_t sw = src.size(-1), dw = dst.size(-1), rows = src.numel() / sw;
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(src.data<float>() + r * sw + src_off, cols, dst.data<float>() + r * dw + dst_off);
}

void expect_equal(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << "element " << i;
}

TEST(CudaRowOps, CopyColumnsMovesOneBlockAndKeepsTheRest) {
  auto rng = test_rng();
  // Widths and offsets that allow 16-, 8-, 4- and 2-byte units; 70,000 rows pass grid.y.
  struct Case {
    int64_t rows, sw, src_off, dw, dst_off, cols;
  };
  const Case cases[] = {{5, 64, 16, 40, 8, 32}, {3, 64, 8, 36, 4, 24},   {4, 33, 5, 20, 7, 11},
                        {2, 17, 1, 9, 2, 6},    {70000, 12, 4, 8, 0, 8}, {6, 16, 0, 16, 0, 16},
                        {4, 10, 3, 10, 3, 0}};
  for (const Case& c : cases)
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dt) << " rows " << c.rows << " src " << c.sw << "+" << c.src_off
                   << " dst " << c.dw << "+" << c.dst_off << " cols " << c.cols);
      Tensor src = random_host({c.rows, c.sw}, rng), dst = random_host({c.rows, c.dw}, rng);
      round_to(src, dt);
      round_to(dst, dt);
      Tensor want = dst.clone();
      copy_block_ref(src, c.src_off, want, c.dst_off, c.cols);
      Tensor ddst = upload(dst, dt);
      const ColumnCopy copy{&ddst, c.dst_off, c.src_off, c.cols};
      copy_columns(upload(src, dt), {&copy, 1}, test_stream());
      expect_equal(download(ddst), want);
    }
}

TEST(CudaRowOps, SplitColumnsFillsEveryOutputInOrder) {
  auto rng = test_rng();
  // q/k/v-like blocks, five outputs (two launches of at most four), and odd widths.
  const std::vector<std::vector<int64_t>> splits = {{64, 16, 16}, {32, 8, 8, 24, 40}, {7, 3, 5}};
  for (const auto& widths : splits)
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const int64_t rows = 9;
      const int64_t total = std::accumulate(widths.begin(), widths.end(), int64_t{0});
      Tensor y = random_host({rows, total}, rng);
      round_to(y, dt);
      std::vector<Tensor> outs;
      std::vector<Tensor*> ptrs;
      for (int64_t w : widths) outs.push_back(device_poisoned({rows, w}, dt));
      for (Tensor& o : outs) ptrs.push_back(&o);
      split_columns(upload(y, dt), ptrs, test_stream());
      int64_t col = 0;
      for (size_t i = 0; i < outs.size(); ++i) {
        Tensor want = Tensor::empty({rows, widths[i]});
        copy_block_ref(y, col, want, 0, widths[i]);
        expect_equal(download(outs[i]), want);  // poisoned (NaN) where nothing was written
        col += widths[i];
      }
    }
}

TEST(CudaRowOps, ColumnCopiesRefuseWhatDoesNotFit) {
  Tensor y = device_poisoned({4, 24}, DType::kBF16);
  Tensor a = device_poisoned({4, 16}, DType::kBF16), b = device_poisoned({4, 4}, DType::kBF16);
  Tensor f = device_poisoned({4, 8}, DType::kF32);
  Tensor* short_outs[] = {&a, &b};  // 20 of 24 columns
  EXPECT_THROW(split_columns(y, short_outs, test_stream()), std::invalid_argument);
  Tensor* mixed[] = {&a, &f};  // another dtype
  EXPECT_THROW(split_columns(y, mixed, test_stream()), std::invalid_argument);
  const ColumnCopy past{&b, 2, 0, 3};  // columns 2..4 of a 4-wide dst
  EXPECT_THROW(copy_columns(y, {&past, 1}, test_stream()), std::invalid_argument);
  Tensor rows5 = device_poisoned({5, 4}, DType::kBF16);
  const ColumnCopy other_rows{&rows5, 0, 0, 4};
  EXPECT_THROW(copy_columns(y, {&other_rows, 1}, test_stream()), std::invalid_argument);
  Tensor alias = y;  // the source itself
  const ColumnCopy onto_src{&alias, 0, 8, 4};
  EXPECT_THROW(copy_columns(y, {&onto_src, 1}, test_stream()), std::invalid_argument);
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
