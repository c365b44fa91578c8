// WeightStore: dtype round trips, sharding, zero-copy lifetime and FP8 block dequantisation.
// Corrupt and missing files are in weight_store_errors_test.cpp.
#include "model/weight_store.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/config.h"
#include "safetensors_writer.h"

namespace kite {
namespace {

using test::RawTensor;
using test::TempDir;

WeightStore open_ok(const std::string& dir, const WeightStoreOptions& opts = {}) {
  auto store = WeightStore::open(dir, opts);
  EXPECT_TRUE(store.ok()) << store.status().message();
  return std::move(store).value();
}

std::vector<float> values_of(const Tensor& t) { return {t.f32().begin(), t.f32().end()}; }

TEST(WeightStore, RoundTripsEveryFloatDtype) {
  TempDir dir;
  const auto v = test::random_floats(6 * 7, 11);
  std::vector<double> v64(v.begin(), v.end());
  for (auto& x : v64) x += 1e-9;  // below fp32 resolution near these magnitudes
  test::write_file(
      dir / "model.safetensors",
      test::serialize_safetensors(
          {test::f32_tensor("a.f32", v, {6, 7}), test::bf16_tensor("a.bf16", v, {6, 7}),
           test::f16_tensor("a.f16", v, {6, 7}), test::f64_tensor("a.f64", v64, {42})}));
  WeightStore store = open_ok(dir.str());
  EXPECT_EQ(store.num_tensors(), 4u);
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a.bf16", "a.f16", "a.f32", "a.f64"}));

  auto f32 = store.get_f32("a.f32", {6, 7});
  ASSERT_TRUE(f32.ok()) << f32.status().message();
  EXPECT_EQ(values_of(*f32), v);
  auto bf16 = store.get_f32("a.bf16", {6, 7});
  auto f16 = store.get_f32("a.f16", {6, 7});
  auto f64 = store.get_f32("a.f64", {42});
  ASSERT_TRUE(bf16.ok() && f16.ok() && f64.ok());
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(bf16->f32()[i], bf16_to_f32(f32_to_bf16(v[i]))) << i;
    EXPECT_EQ(f16->f32()[i], f16_to_f32(f32_to_f16(v[i]))) << i;
    EXPECT_EQ(f64->f32()[i], static_cast<float>(v64[i])) << i;
    EXPECT_NEAR(bf16->f32()[i], v[i], std::fabs(v[i]) / 128);  // and not garbage
  }
  EXPECT_EQ(bf16->dtype(), DType::kF32);
}

TEST(WeightStore, GetRawIsZeroCopyAndOutlivesTheStore) {
  TempDir dir;
  const auto v = test::random_floats(5 * 3, 12);
  test::write_file(dir / "model.safetensors",
                   test::serialize_safetensors({test::bf16_tensor("w", v, {5, 3}),
                                                RawTensor{"ids", "I32", {3}, std::string(12, 7)}}));
  Tensor raw;
  {
    WeightStore store = open_ok(dir.str());
    auto a = store.get_raw("w");
    auto b = store.get_raw("w");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->raw(), b->raw());  // both view the mapping, no copy
    EXPECT_EQ(a->dtype(), DType::kBF16);
    EXPECT_EQ(a->shape(), (Shape{5, 3}));
    auto ids = store.get_raw("ids");
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids->dtype(), DType::kI32);
    auto info = store.info("w");
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->dtype, DType::kBF16);
    EXPECT_NE(info->file.find("model.safetensors"), std::string::npos);
    raw = *a;
  }
  // The store is gone; the view's shared owner keeps the mapping alive.
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(bf16_to_f32(raw.data<uint16_t>()[i]), bf16_to_f32(f32_to_bf16(v[i])));
}

TEST(WeightStore, OpensAShardedCheckpointThroughItsIndex) {
  TempDir dir;
  const auto a = test::random_floats(8, 21), b = test::random_floats(12, 22);
  const auto c = test::random_floats(4, 23);
  test::write_file(dir / "model-00001-of-00002.safetensors",
                   test::serialize_safetensors(
                       {test::f32_tensor("a", a, {8}), test::bf16_tensor("b", b, {3, 4})}));
  test::write_file(dir / "model-00002-of-00002.safetensors",
                   test::serialize_safetensors({test::f32_tensor("c", c, {2, 2})}));
  // A stray model.safetensors must be ignored when the index exists.
  test::write_file(dir / "model.safetensors",
                   test::serialize_safetensors({test::f32_tensor("stray", c, {4})}));
  nlohmann::json index = {{"metadata", {{"total_size", 60}}},
                          {"weight_map",
                           {{"a", "model-00001-of-00002.safetensors"},
                            {"b", "model-00001-of-00002.safetensors"},
                            {"c", "model-00002-of-00002.safetensors"}}}};
  test::write_file(dir / "model.safetensors.index.json", index.dump());
  WeightStore store = open_ok(dir.str());
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a", "b", "c"}));
  auto ta = store.get_f32("a", {8});
  auto tc = store.get_f32("c", {2, 2});
  ASSERT_TRUE(ta.ok() && tc.ok());
  EXPECT_EQ(values_of(*ta), a);
  EXPECT_EQ(values_of(*tc), c);
  EXPECT_NE(store.info("c")->file.find("00002-of-00002"), std::string::npos);
  EXPECT_FALSE(store.contains("stray"));
}

TEST(WeightStore, OpensEverySafetensorsFileWithoutAnIndex) {
  TempDir dir;
  const auto a = test::random_floats(3, 31), b = test::random_floats(5, 32);
  test::write_file(dir / "part-a.safetensors",
                   test::serialize_safetensors({test::f32_tensor("x.a", a, {3})}));
  test::write_file(dir / "part-b.safetensors",
                   test::serialize_safetensors({test::f32_tensor("x.b", b, {5})}));
  test::write_file(dir / "notes.txt", "not a tensor file");
  WeightStore store = open_ok(dir.str());
  EXPECT_EQ(store.num_tensors(), 2u);
  EXPECT_EQ(values_of(store.get_f32("x.b", {5}).value()), b);
  // A single file path works too.
  WeightStore one = open_ok((dir / "part-a.safetensors").string());
  EXPECT_EQ(values_of(one.get_f32("x.a", {3}).value()), a);
  EXPECT_FALSE(one.contains("x.b"));
}

TEST(WeightStore, LargeTensorsConvertTheSameOnTheParallelPath) {
  TempDir dir;
  const int64_t rows = 300, cols = 301;  // above the OpenMP threshold
  const auto v = test::random_floats(rows * cols, 41);
  test::write_file(dir / "model.safetensors",
                   test::serialize_safetensors({test::bf16_tensor("w", v, {rows, cols}),
                                                test::f16_tensor("h", v, {rows, cols})}));
  WeightStore store = open_ok(dir.str());
  auto w = store.get_f32("w", {rows, cols});
  auto h = store.get_f32("h", {rows, cols});
  ASSERT_TRUE(w.ok() && h.ok());
  size_t mismatches = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    mismatches += w->f32()[i] != bf16_to_f32(f32_to_bf16(v[i]));
    mismatches += h->f32()[i] != f16_to_f32(f32_to_f16(v[i]));
  }
  EXPECT_EQ(mismatches, 0u);
}

// Hand computation of the DeepSeek-V3 rule, independent of the implementation's loop order.
float fp8_block_reference(const std::vector<uint8_t>& w, const std::vector<float>& s, int64_t cols,
                          int64_t scale_cols, int64_t br, int64_t bc, int64_t r, int64_t c) {
  return fp8e4m3_to_f32(w[r * cols + c]) * s[(r / br) * scale_cols + (c / bc)];
}

TEST(WeightStore, DequantisesFp8BlocksWithPartialEdgeBlocks) {
  TempDir dir;
  const int64_t rows = 130, cols = 200;  // 2x2 blocks of 128: the second row/col are partial
  const auto codes = test::random_fp8_codes(rows * cols, 51);
  const auto scale = test::random_floats(4, 52, 0.001f, 0.1f);
  test::write_file(
      dir / "model.safetensors",
      test::serialize_safetensors(
          {test::fp8_tensor("layers.0.mlp.down_proj.weight", codes, {rows, cols}),
           test::f32_tensor("layers.0.mlp.down_proj.weight_scale_inv", scale, {2, 2})}));
  WeightStore store = open_ok(dir.str());
  auto w = store.get_f32("layers.0.mlp.down_proj.weight", {rows, cols});
  ASSERT_TRUE(w.ok()) << w.status().message();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(w->f32()[r * cols + c], fp8_block_reference(codes, scale, cols, 2, 128, 128, r, c))
          << r << "," << c;
  // Spot checks on the block corners, written out by hand.
  auto at = [&](int64_t r, int64_t c) { return w->f32()[r * cols + c]; };
  EXPECT_EQ(at(127, 127), fp8e4m3_to_f32(codes[127 * cols + 127]) * scale[0]);
  EXPECT_EQ(at(0, 128), fp8e4m3_to_f32(codes[128]) * scale[1]);
  EXPECT_EQ(at(128, 0), fp8e4m3_to_f32(codes[128 * cols]) * scale[2]);
  EXPECT_EQ(at(129, 199), fp8e4m3_to_f32(codes[129 * cols + 199]) * scale[3]);
  // get_raw still returns the stored FP8 bytes.
  EXPECT_EQ(store.get_raw("layers.0.mlp.down_proj.weight")->dtype(), DType::kF8E4M3);
}

TEST(WeightStore, DequantisesFp8WithBf16ScalesAndConfiguredBlockSize) {
  TempDir dir;
  const int64_t rows = 300, cols = 250;  // big enough for the parallel path
  ModelConfig cfg;
  cfg.fp8_block_rows = 64;
  cfg.fp8_block_cols = 96;
  const int64_t srows = 5, scols = 3;  // ceil(300/64), ceil(250/96)
  const auto codes = test::random_fp8_codes(rows * cols, 61);
  auto scale = test::random_floats(srows * scols, 62, 0.01f, 2.f);
  for (auto& s : scale) s = bf16_to_f32(f32_to_bf16(s));  // exactly representable in BF16
  test::write_file(dir / "model.safetensors",
                   test::serialize_safetensors(
                       {test::fp8_tensor("q.weight", codes, {rows, cols}),
                        test::bf16_tensor("q.weight_scale_inv", scale, {srows, scols})}));
  WeightStore store = open_ok(dir.str(), WeightStoreOptions::from_config(cfg));
  auto w = store.get_f32("q.weight", {rows, cols});
  ASSERT_TRUE(w.ok()) << w.status().message();
  size_t mismatches = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      mismatches +=
          w->f32()[r * cols + c] != fp8_block_reference(codes, scale, cols, scols, 64, 96, r, c);
  EXPECT_EQ(mismatches, 0u);
}

TEST(WeightStore, Fp8WithoutScalesConvertsCodesDirectly) {
  TempDir dir;
  const auto codes = test::random_fp8_codes(16, 71);
  test::write_file(dir / "model.safetensors",
                   test::serialize_safetensors({test::fp8_tensor("e", codes, {4, 4})}));
  WeightStore store = open_ok(dir.str());
  auto e = store.get_f32("e", {4, 4});
  ASSERT_TRUE(e.ok());
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(e->f32()[i], fp8e4m3_to_f32(codes[i]));
}

}  // namespace
}  // namespace kite
