// Quantized weights on the device (quant_linear.h): host QuantizedWeight -> the kernels' layouts
// (INT4 repacked into MMA-fragment tiles, act-order resolved) and random dummy weights made on
// the GPU. The kernels that read them are in quant_linear.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/quant/quant_geometry.h"
#include "kernels/cuda/quant/quant_linear.h"

namespace kite::cuda {
namespace {

using namespace quant_detail;

// Dummy weights.

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// mode 0: any byte; 1: FP8 E4M3 without NaN; 2: INT8 in [-127, 127]; 3: 0..15
__global__ void random_bytes_kernel(uint8_t* p, int64_t n, uint64_t seed, int mode) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = mix64(seed ^ mix64(static_cast<uint64_t>(i)));
    uint8_t b = static_cast<uint8_t>(h);
    if (mode == 1 && (b & 0x7F) == 0x7F) b &= 0xFE;
    if (mode == 2) b = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(h % 255) - 127));
    if (mode == 3) b &= 0x0F;
    p[i] = b;
  }
}

__global__ void random_floats_kernel(float* p, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = mix64(seed ^ mix64(static_cast<uint64_t>(i) + 0x1234567ull));
    p[i] = lo + (hi - lo) * static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  }
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(ceil_div(std::max<int64_t>(n, 1), 256), 4096));
}

Tensor upload_bytes(const std::vector<uint8_t>& host, const Shape& shape, DType dtype,
                    cudaStream_t stream) {
  Tensor t = device_empty(shape, dtype);
  if (!host.empty())
    KITE_CUDA_CHECK(cudaMemcpyAsync(t.raw(), host.data(), host.size(), cudaMemcpyHostToDevice, stream));
  return t;
}

Tensor upload_floats(const std::vector<float>& host, const Shape& shape, cudaStream_t stream) {
  Tensor t = device_empty(shape, DType::kF32);
  if (!host.empty())
    KITE_CUDA_CHECK(cudaMemcpyAsync(t.raw(), host.data(), host.size() * 4, cudaMemcpyHostToDevice,
                                    stream));
  return t;
}

// The INT4 tile layout: byte offset of lane (g, t)'s word s within its 512-byte tile, and the
// (row, channel) of nibble `nib` of that word.
void w4_nibble_source(int lane, int s, int nib, int& row, int& ch) {
  const int g = lane >> 2, t = lane & 3;
  const int pair = nib & 3, hi = nib >> 2;  // pair p = nibbles p (low element) and p + 4
  row = g + ((pair & 1) ? 8 : 0);
  ch = 16 * t + 4 * s + ((pair & 2) ? 2 : 0) + hi;
}

}  // namespace

int64_t DeviceQuantizedWeight::storage_bytes() const {
  int64_t b = 0;
  for (const Tensor* t : {&codes, &scales, &zeros})
    if (t->defined()) b += static_cast<int64_t>(t->size_bytes());
  return b;
}

DeviceQuantizedWeight upload_quantized(const QuantizedWeight& w, cudaStream_t stream) {
  const Status st = w.validate();
  if (!st.ok()) throw std::invalid_argument(std::string("upload_quantized: ") + st.message());
  DeviceQuantizedWeight d;
  d.format = w.format;
  const int64_t n = w.out_features, k = w.in_features;
  d.out_features = n;
  d.in_features = k;
  d.padded_out = round_up(std::max<int64_t>(n, 1), kRowAlign);
  d.padded_in = round_up(std::max<int64_t>(k, 1), kChunk);
  d.block_rows = w.block_rows;
  d.block_cols = w.block_cols;
  const int64_t np = d.padded_out, kp = d.padded_in;
  // Host staging buffers must outlive the async copies: synchronize before returning.
  std::vector<uint8_t> codes, zeros;
  std::vector<float> scales, iscale;
  std::vector<int32_t> perm;
  switch (w.format) {
    case QuantFormat::kInt4Group: {
      const int64_t groups = w.num_groups();
      const int64_t gs = w.group_size;
      if (!(gs % kChunk == 0 || groups == 1))
        throw std::invalid_argument("upload_quantized: int4 group_size " + std::to_string(gs) +
                                    " is not a multiple of 64");
      d.group_size = groups == 1 ? std::max<int64_t>(gs, kp) : gs;
      d.groups = groups;
      // Channel order: sorted by group (act order), else identity.
      std::vector<int32_t> order(static_cast<size_t>(k));
      std::iota(order.begin(), order.end(), 0);
      if (w.g_idx.defined()) {
        const int32_t* gi = w.g_idx.data<int32_t>();
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return gi[a] < gi[b]; });
        for (int64_t j = 0; j < k; ++j)
          if (gi[order[j]] != (groups == 1 ? 0 : j / gs))
            throw std::invalid_argument(
                "upload_quantized: g_idx groups are not group_size channels each");
        perm = order;
      }
      const uint8_t* src = w.codes.data<uint8_t>();
      const int64_t kb = (k + 1) / 2;
      auto code = [&](int64_t r, int64_t ch) -> uint8_t {
        if (r >= n || ch >= k) return 0;
        const int64_t o = order[ch];
        return (src[r * kb + o / 2] >> (4 * (o & 1))) & 0xF;
      };
      codes.assign(static_cast<size_t>(np * kp / 2), 0);
      const int64_t nchunks = kp / kChunk;
      for (int64_t tile = 0; tile < np / 16; ++tile)
        for (int64_t c = 0; c < nchunks; ++c) {
          uint8_t* dst = codes.data() + (tile * nchunks + c) * 512;
          for (int lane = 0; lane < 32; ++lane)
            for (int s = 0; s < 4; ++s) {
              uint32_t wd = 0;
              for (int nib = 0; nib < 8; ++nib) {
                int row, ch;
                w4_nibble_source(lane, s, nib, row, ch);
                wd |= static_cast<uint32_t>(code(tile * 16 + row, c * kChunk + ch)) << (4 * nib);
              }
              std::memcpy(dst + lane * 16 + s * 4, &wd, 4);
            }
        }
      scales.assign(static_cast<size_t>(groups * np), 0.0f);
      zeros.assign(static_cast<size_t>(groups * np), 0);
      const float* sc = w.scales.data<float>();
      const uint8_t* zs = w.zeros.data<uint8_t>();
      for (int64_t r = 0; r < n; ++r)
        for (int64_t gi = 0; gi < groups; ++gi) {
          scales[gi * np + r] = sc[r * groups + gi];
          zeros[gi * np + r] = zs[r * groups + gi];
        }
      d.codes = upload_bytes(codes, {np / 16, nchunks, 32, 16}, DType::kU8, stream);
      d.scales = upload_floats(scales, {groups, np}, stream);
      d.zeros = upload_bytes(zeros, {groups, np}, DType::kU8, stream);
      if (!perm.empty()) {
        d.perm = device_empty({k}, DType::kI32);
        KITE_CUDA_CHECK(cudaMemcpyAsync(d.perm.raw(), perm.data(), perm.size() * 4,
                                        cudaMemcpyHostToDevice, stream));
      }
      break;
    }
    case QuantFormat::kFp8PerChannel:
    case QuantFormat::kInt8PerChannel:
    case QuantFormat::kFp8Block: {
      if (w.format == QuantFormat::kFp8Block && (w.block_cols % kChunk != 0 || w.block_rows <= 0))
        throw std::invalid_argument("upload_quantized: fp8 block_cols must be a multiple of 64");
      codes.assign(static_cast<size_t>(np * kp), 0);
      const uint8_t* src = static_cast<const uint8_t*>(w.codes.raw());
      for (int64_t r = 0; r < n; ++r) std::memcpy(codes.data() + r * kp, src + r * k, k);
      d.codes = upload_bytes(codes, {np, kp},
                             w.format == QuantFormat::kInt8PerChannel ? DType::kI8 : DType::kF8E4M3,
                             stream);
      if (w.format == QuantFormat::kFp8Block) {
        scales.assign(w.scales.data<float>(), w.scales.data<float>() + w.scales.numel());
        d.scales = upload_floats(scales, w.scales.shape(), stream);
      } else {
        scales.assign(static_cast<size_t>(np), 0.0f);
        std::memcpy(scales.data(), w.scales.data<float>(), n * 4);
        d.scales = upload_floats(scales, {np}, stream);
      }
      break;
    }
  }
  if (w.input_scale.defined()) {
    iscale.assign(w.input_scale.data<float>(), w.input_scale.data<float>() + k);
    d.input_scale = upload_floats(iscale, {k}, stream);
  }
  KITE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return d;
}

DeviceQuantizedWeight dummy_quantized(QuantFormat format, int64_t n, int64_t k, uint64_t seed,
                                      cudaStream_t stream) {
  DeviceQuantizedWeight d;
  d.format = format;
  d.out_features = n;
  d.in_features = k;
  d.padded_out = round_up(std::max<int64_t>(n, 1), kRowAlign);
  d.padded_in = round_up(std::max<int64_t>(k, 1), kChunk);
  const int64_t np = d.padded_out, kp = d.padded_in;
  auto bytes = [&](Tensor& t, int mode, uint64_t salt) {
    random_bytes_kernel<<<grid_for(t.numel()), 256, 0, stream>>>(t.data<uint8_t>(), t.numel(),
                                                                 seed * 0x100000001B3ull + salt, mode);
    KITE_CUDA_CHECK_LAUNCH();
  };
  auto floats = [&](Tensor& t, float lo, float hi, uint64_t salt) {
    random_floats_kernel<<<grid_for(t.numel()), 256, 0, stream>>>(
        t.data<float>(), t.numel(), seed * 0x100000001B3ull + salt, lo, hi);
    KITE_CUDA_CHECK_LAUNCH();
  };
  switch (format) {
    case QuantFormat::kInt4Group: {
      d.group_size = 128;
      d.groups = ceil_div(k, 128);
      d.codes = device_empty({np / 16, kp / kChunk, 32, 16}, DType::kU8);
      d.scales = device_empty({d.groups, np}, DType::kF32);
      d.zeros = device_empty({d.groups, np}, DType::kU8);
      bytes(d.codes, 0, 1);
      floats(d.scales, 0.001f, 0.004f, 2);  // a group's range 15 * s ~ 0.015..0.06
      bytes(d.zeros, 3, 3);
      break;
    }
    case QuantFormat::kFp8PerChannel:
    case QuantFormat::kInt8PerChannel: {
      const bool i8 = format == QuantFormat::kInt8PerChannel;
      d.codes = device_empty({np, kp}, i8 ? DType::kI8 : DType::kF8E4M3);
      d.scales = device_empty({np}, DType::kF32);
      bytes(d.codes, i8 ? 2 : 1, 1);
      floats(d.scales, i8 ? 1e-4f : 1e-4f, i8 ? 4e-4f : 3e-4f, 2);
      break;
    }
    case QuantFormat::kFp8Block: {
      d.codes = device_empty({np, kp}, DType::kF8E4M3);
      d.scales = device_empty({ceil_div(n, 128), ceil_div(k, 128)}, DType::kF32);
      bytes(d.codes, 1, 1);
      floats(d.scales, 1e-4f, 3e-4f, 2);
      break;
    }
  }
  return d;
}

}  // namespace kite::cuda
