// Test helpers: write small safetensors files (valid or deliberately broken) into a temp dir.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace kite::test {

// A tensor as it will be written: safetensors dtype string, shape and raw little-endian bytes.
struct RawTensor {
  std::string name;
  std::string dtype;
  Shape shape;
  std::string bytes;
};

template <typename T>
std::string to_bytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

inline RawTensor f32_tensor(std::string name, const std::vector<float>& v, Shape shape) {
  return {std::move(name), "F32", std::move(shape), to_bytes(v)};
}
inline RawTensor f64_tensor(std::string name, const std::vector<double>& v, Shape shape) {
  return {std::move(name), "F64", std::move(shape), to_bytes(v)};
}
inline RawTensor bf16_tensor(std::string name, const std::vector<float>& v, Shape shape) {
  std::vector<uint16_t> h;
  for (float x : v) h.push_back(f32_to_bf16(x));
  return {std::move(name), "BF16", std::move(shape), to_bytes(h)};
}
inline RawTensor f16_tensor(std::string name, const std::vector<float>& v, Shape shape) {
  std::vector<uint16_t> h;
  for (float x : v) h.push_back(f32_to_f16(x));
  return {std::move(name), "F16", std::move(shape), to_bytes(h)};
}
inline RawTensor fp8_tensor(std::string name, const std::vector<uint8_t>& codes, Shape shape) {
  return {std::move(name), "F8_E4M3", std::move(shape), to_bytes(codes)};
}

// Safetensors file image from a header JSON text and a data section, with the header padded
// to a multiple of 8 bytes as the reference writer does.
inline std::string make_file_image(std::string header, const std::string& data) {
  while ((header.size() % 8) != 0) header.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// Contiguous data section in the given order; `__metadata__` always present.
inline nlohmann::json make_header(const std::vector<RawTensor>& tensors, std::string* data) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  data->clear();
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data->size(), data->size() + t.bytes.size()}}};
    *data += t.bytes;
  }
  return header;
}

inline std::string serialize_safetensors(const std::vector<RawTensor>& tensors) {
  std::string data;
  nlohmann::json header = make_header(tensors, &data);
  return make_file_image(header.dump(), data);
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string leaf = "kite_loader_" + std::to_string(::getpid()) + "_" +
                       std::to_string(counter++) + "_" + (info ? info->name() : "x");
    path_ = std::filesystem::temp_directory_path() / leaf;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& leaf) const { return path_ / leaf; }

 private:
  std::filesystem::path path_;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Random E4M3 codes, excluding the two NaN codes (0x7f, 0xff) so results compare exactly.
inline std::vector<uint8_t> random_fp8_codes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& c : v) {
    do c = static_cast<uint8_t>(u(rng));
    while ((c & 0x7f) == 0x7f);
  }
  return v;
}

}  // namespace kite::test
