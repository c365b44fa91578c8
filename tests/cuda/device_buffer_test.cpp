#include "kernels/cuda/device_buffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {
namespace {

using namespace testing;

TEST(CudaDeviceBuffer, RoundTripsF32ExactlyAndBf16ByRounding) {
  auto rng = test_rng();
  Tensor host = random_host({3, 257}, rng, -100.0f, 100.0f);
  Tensor f32 = upload(host, DType::kF32);
  EXPECT_EQ(f32.device(), Device::kCuda);
  EXPECT_EQ(f32.dtype(), DType::kF32);
  Tensor back = download(f32);
  EXPECT_EQ(std::memcmp(back.raw(), host.raw(), host.size_bytes()), 0);

  Tensor bf = upload(host, DType::kBF16);
  Tensor rounded = host.clone();
  round_to(rounded, DType::kBF16);
  EXPECT_EQ(rel_error(download(bf), rounded), 0.0);
  EXPECT_GT(rel_error(rounded, host), 0.0);  // the rounding did happen
}

TEST(CudaDeviceBuffer, PoisonMakesNanAndIndexUpload) {
  Tensor t = device_poisoned({100}, DType::kBF16);
  Tensor h = download(t);
  EXPECT_TRUE(all_nan(h.data<float>(), 100));
  const std::vector<int64_t> slots = {5, -1, 1LL << 40};
  Tensor d = to_device(std::span<const int64_t>(slots), {3}, test_stream());
  Tensor back = to_host(d, test_stream());
  EXPECT_EQ(std::memcmp(back.raw(), slots.data(), 24), 0);
}

TEST(CudaDeviceBuffer, ViewsShareBytesAndBufferGrows) {
  Tensor t = device_empty({4, 8}, DType::kF32);
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(static_cast<const char*>(rows.raw()) - static_cast<const char*>(t.raw()), 32);
  DeviceBuffer buffer(16);
  buffer.reserve(8);
  EXPECT_EQ(buffer.size_bytes(), 16u);
  buffer.reserve(1 << 20);
  EXPECT_EQ(buffer.size_bytes(), 1u << 20);
  DeviceBuffer moved = std::move(buffer);
  EXPECT_EQ(buffer.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);
}

TEST(CudaDeviceBuffer, ErrorsBecomeExceptions) {
  Tensor host = Tensor::empty({2});
  EXPECT_THROW(to_device(host, DType::kI32, test_stream()), std::invalid_argument);
  EXPECT_THROW(to_host(host, test_stream()), std::invalid_argument);
  Tensor dev = device_empty({2}, DType::kF32);
  EXPECT_THROW(dev.clone(), std::invalid_argument);
  // An allocation no device can satisfy: a non-sticky error, reported with the size asked for
  // (the engine's profiling step turns it into "lower --max-num-batched-tokens") and cleared,
  // so the next launch check does not see it.
  try {
    DeviceBuffer huge(size_t{1} << 60);
    FAIL() << "expected a CudaError";
  } catch (const CudaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of GPU memory"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string((size_t{1} << 60) >> 20) + " MiB"), std::string::npos)
        << what;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace kite::cuda
