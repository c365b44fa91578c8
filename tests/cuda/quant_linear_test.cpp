// The CUDA quantized linear (kernels/cuda/quant/quant_linear.h) against the CPU reference
// ops::quantized_linear, for every format, over M in {1, 3, 8, 9, 16, 64, 130} (each kernel
// configuration and the token-tile grid), K a multiple of 64 or not (the padded path), bias
// on/off, F32 and BF16 output, input_scale, and GPTQ act order (g_idx).
//
// The reference sees exactly the GPU's inputs: x is drawn, rounded to BF16, and the rounded
// values are what the CPU op gets. Tolerances (relative L2 error over the output):
//   * W8A8 (FP8/INT8 per channel, FP8 block): both sides quantize the activations with the
//     same IEEE operations (x * input_scale, amax, amax / qmax, v * (1 / scale), round to nearest
//     even; quant/activation_scale.h), so the codes are bit-identical and the products of decoded
//     values are exact; what differs is fp32 summation order and where the scales are multiplied
//     in: ~1e-6. Bound 1e-4 for F32 output (INT8 accumulates exactly in int32).
//   * W4A16 without input_scale: (q - zero) is an exact BF16 integer, x is BF16, so every
//     product is exact in the tensor core's fp32 accumulation and the group scale is applied in
//     fp32: again only summation order. Bound 1e-4 for F32 output.
//   * W4A16 with input_scale (or act order with input_scale): the kernel takes BF16 activations,
//     so x * input_scale is rounded to BF16 (2^-9 relative per element, ~1e-3 on the output);
//     bound 5e-3.
//   * BF16 output adds one rounding (2^-9 relative per element): bound 5e-3.
// NaN never passes: y is poisoned with NaN first and rel_error is infinite on any non-finite.
#include "kernels/cuda/quant/quant_linear.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm/blaslt.h"
#include "kernels/cuda/quant/fp8_gemm_lt.h"
#include "kernels/quant_ops.h"
#include "quant/quantized_weight.h"
#include "quant_test_util.h"

namespace kite::cuda {
namespace {

using namespace testing;

// Makes `q` (int4, no g_idx) an act-order weight computing the same thing: original channel
// perm[j] takes the codes of column j, and g_idx[perm[j]] = j / group_size.
QuantizedWeight with_act_order(const QuantizedWeight& q, std::mt19937& rng) {
  const int64_t n = q.out_features, k = q.in_features, kb = (k + 1) / 2;
  std::vector<int32_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  QuantizedWeight a = q;
  a.codes = Tensor::zeros({n, kb}, DType::kU8);
  a.g_idx = Tensor::empty({k}, DType::kI32);
  const uint8_t* src = q.codes.data<uint8_t>();
  uint8_t* dst = a.codes.data<uint8_t>();
  for (int64_t j = 0; j < k; ++j) {
    const int64_t o = perm[j];
    a.g_idx.data<int32_t>()[o] = static_cast<int32_t>(j / q.group_size);
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t v = (src[r * kb + j / 2] >> (4 * (j & 1))) & 0xF;
      dst[r * kb + o / 2] |= static_cast<uint8_t>(v << (4 * (o & 1)));
    }
  }
  return a;
}

struct Case {
  QuantFormat format;
  int64_t m, n, k;
  bool bias, input_scale, act_order;
  DType out;
  int dec_kw = 0, dec_u = 0;  // set_quant_decode_override for M <= 8 (0: automatic)
  int dec_path = 0;  // 1: M <= 8 on the tensor-core kernel, 2: the decode kernel, 3: bulk GEMV
  DType bias_dtype = DType::kF32;  // BF16: rounded first, so the CPU op sees the same bias
};

std::string describe(const Case& c) {
  return std::string(quant_format_name(c.format)) + " M=" + std::to_string(c.m) +
         " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) + (c.bias ? " bias" : "") +
         (c.input_scale ? " input_scale" : "") + (c.act_order ? " act_order" : "") + " out=" +
         dtype_label(c.out) + (c.dec_kw ? " kw=" + std::to_string(c.dec_kw) : "") +
         (c.dec_u ? " u=" + std::to_string(c.dec_u) : "") + (c.dec_path == 1 ? " mma" : "") +
         (c.dec_path == 3 ? " bulk" : "");
}

void run_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  Tensor wf = random_host({c.n, c.k}, rng, -0.05f, 0.05f);
  QuantizedWeight q = quantize_as(c.format, wf);
  if (c.format == QuantFormat::kInt4Group && c.act_order) q = with_act_order(q, rng);
  if (c.input_scale) q.input_scale = random_host({c.k}, rng, 0.25f, 4.0f);
  ASSERT_TRUE(q.validate().ok()) << q.validate().message();
  // Activations with a few outliers per row, as real ones have (they set the W8A8 scales).
  Tensor x = random_host({c.m, c.k}, rng);
  std::uniform_int_distribution<int64_t> pick(0, c.k - 1);
  for (int64_t r = 0; r < c.m; ++r) x.data<float>()[r * c.k + pick(rng)] *= 8.0f;
  round_to(x, DType::kBF16);
  Tensor b = random_host({c.n}, rng);
  if (c.bias_dtype == DType::kBF16) round_to(b, DType::kBF16);
  Tensor ref = Tensor::empty({c.m, c.n});
  ops::quantized_linear(x, q, c.bias ? &b : nullptr, ref);

  const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
  const Tensor dx = upload(x, DType::kBF16);
  const Tensor db = upload(b, c.bias_dtype);
  Tensor y = device_poisoned({c.m, c.n}, c.out);
  DeviceBuffer ws(std::max<size_t>(quantized_linear_workspace_bytes(dw, c.m), 1));
  set_quant_decode_override(c.dec_path, c.dec_kw, c.dec_u);
  // FP8 per channel from two rows on the bulk GEMV takes BF16 activations (W8A16): its reference
  // is the dequantized weight times x, not the CPU op's W8A8.
  if (quantized_linear_reads_bf16_activations(dw, c.m))
    ref = linear_ref(x, q.dequantize(), c.bias ? &b : nullptr);
  quantized_linear(test_blas(), dx, dw, c.bias ? &db : nullptr, y, ws.data(), ws.size_bytes(),
                   test_stream());
  set_quant_decode_override(0);
  KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
  double tol = 1e-4;
  if (c.format == QuantFormat::kInt4Group && c.input_scale) tol = 5e-3;
  // Above 128 rows W4A16 expands W to BF16 for cuBLASLt (w4_dequant.h): each weight rounded.
  if (c.format == QuantFormat::kInt4Group && c.m > 128) tol = 5e-3;
  // FP8 past 16 rows is cuBLASLt's FP8 GEMM, whose tensor-core sums keep fewer bits than fp32
  // (1.1e-4 measured at K = 512-1000 with F32 output, H100).
  if (c.format == QuantFormat::kFp8PerChannel && takes_lt_route(dw, c.m)) tol = 3e-4;
  if (c.out == DType::kBF16) tol = 5e-3;
  const double err = rel_error(download(y), ref);
  EXPECT_LE(err, tol);
  if (std::getenv("KITE_QUANT_TEST_VERBOSE"))
    std::printf("  %-70s rel err %.3g\n", describe(c).c_str(), err);
}

void run_format(QuantFormat format) {
  auto rng = test_rng();
  const int64_t ms[] = {1, 3, 8, 9, 16, 64, 130};
  // (N, K): K a multiple of 128; a multiple of 64 only (half a group / block at the end); not
  // a multiple of 64 (padded path, 136 = one group + 8); odd N; a long K with one row tile.
  const std::pair<int64_t, int64_t> shapes[] = {{256, 512}, {200, 320}, {77, 136}, {130, 1000}};
  int i = 0;
  for (const auto& [n, k] : shapes)
    for (int64_t m : ms) {
      ++i;
      Case c{format, m, n, k, i % 2 == 0, i % 3 == 0, false, i % 4 < 2 ? DType::kF32 : DType::kBF16};
      if (format == QuantFormat::kInt4Group) c.act_order = i % 5 < 2;
      run_case(c, rng);
    }
  // A decode-sized case with K not a multiple of 256 (nor of 64) and every option on; and one
  // with none, K = 4096 (the direct-x W4 path).
  run_case({format, 1, 1001, 4104, true, true, format == QuantFormat::kInt4Group, DType::kF32}, rng);
  run_case({format, 9, 512, 4096, false, false, false, DType::kF32}, rng);
  run_case({format, 64, 512, 4096, true, false, false, DType::kBF16}, rng);
}

// More rows than a launch takes (65,535 on grid.y in the prep and activation-quantization
// kernels; a prefill chunk of 65,536 tokens has them): the op runs in row slices. Every format at
// M = 70,000 against the CPU op, with a bias, input_scale and act order where they apply, F32
// and BF16 output.
TEST(CudaQuantLinear, RowsPastOneLaunchGoInSlices) {
  auto rng = test_rng();
  int i = 0;
  for (QuantFormat f : {QuantFormat::kFp8PerChannel, QuantFormat::kInt8PerChannel,
                        QuantFormat::kInt4Group, QuantFormat::kFp8Block}) {
    ++i;
    run_case({f, 70000, 48, 256, true, i % 2 == 0, f == QuantFormat::kInt4Group,
              i % 2 == 0 ? DType::kF32 : DType::kBF16},
             rng);
  }
}

// The decode kernel (M <= 8): every M from 1 to 8 for each format, K a multiple of 64 or not
// (136, 1000, 4104: not multiples of 256 either), act order, input_scale, bias, F32 and BF16
// output; with the automatic split and forced ones (1 warp per tile; 3 and 16, which leave some
// warps without chunks on the short K; 2 chunks in flight), forced for every format.
void run_decode(QuantFormat format) {
  auto rng = test_rng();
  const std::pair<int64_t, int64_t> shapes[] = {{77, 136}, {200, 320}, {130, 1000}, {1001, 4104}};
  const int kws[] = {0, 1, 3, 16};
  for (int64_t m = 1; m <= 8; ++m) {
    const auto [n, k] = shapes[m % 4];
    Case c{format, m, n, k, m % 3 != 0, m % 2 == 0, false, m % 4 < 2 ? DType::kF32 : DType::kBF16};
    if (format == QuantFormat::kInt4Group) c.act_order = m % 2 == 1;
    c.dec_kw = kws[(m / 2) % 4];
    c.dec_u = m % 3 == 0 ? 2 : 0;
    c.dec_path = 2;
    run_case(c, rng);
    c.dec_kw = 0;  // the same case on the bulk-copy GEMV (FP8 block: the decode kernel again)
    c.dec_u = 0;
    c.dec_path = 3;
    run_case(c, rng);
    if (m <= 2) {  // path 3 quantized FP8 / INT8 activations in-block; 4 in a kernel before
      c.dec_path = 4;
      run_case(c, rng);
    }
    if (m == 1 || m == 8) {  // and on the tensor-core kernel
      c.dec_path = 1;
      run_case(c, rng);
    }
  }
  // The bulk GEMV's stage boundaries: K of exactly one stage (32 chunks of 64), half of one,
  // one chunk past it, several stages with a short last one, more stages per tile than the ring
  // holds (10 > 8 for W4, > 4 for 8-bit: the slots are reused); N of one 16-row tile and of more
  // tiles than the grid has blocks (each block then takes several, alternating its buffers).
  // The last, at M = 3: 193 chunks, six full stages and one chunk.
  const std::pair<int64_t, int64_t> bulk_shapes[] = {
      {16, 2048}, {40, 1024}, {64, 2112}, {300, 4160}, {4200, 1024}, {96, 20480}, {48, 12352}};
  int64_t m = 1;
  for (const auto& [n, k] : bulk_shapes) {
    Case c{format, m, n, k, m % 2 == 1, false, false, m % 3 == 0 ? DType::kBF16 : DType::kF32};
    c.dec_path = 3;
    run_case(c, rng);
    if (m <= 2) {
      c.dec_path = 4;
      run_case(c, rng);
    }
    m = m % 8 + 3;
  }
  // 8-bit codes from 9 to 16 rows on the bulk GEMV's two token tiles (9 and 12 leave the second
  // one partly empty), over the same stage boundaries; FP8 also on BF16 x there (path 5, W8A16:
  // what automatic mode takes; its reference is the dequantized weight, as run_case says).
  if (format != QuantFormat::kFp8PerChannel && format != QuantFormat::kInt8PerChannel) return;
  int i = 0;
  for (const auto& [n, k] : bulk_shapes)
    for (int64_t rows : {9, 12, 16}) {
      ++i;
      Case c{format,     rows,       n,     k,
             i % 3 == 0, i % 5 == 0, false, i % 4 < 2 ? DType::kF32 : DType::kBF16};
      c.dec_path = 3;
      run_case(c, rng);
      if (format == QuantFormat::kFp8PerChannel && !c.input_scale) {
        c.dec_path = 5;
        run_case(c, rng);
      }
    }
}

TEST(CudaQuantLinear, DecodeInt4GroupMatchesCpu) { run_decode(QuantFormat::kInt4Group); }
TEST(CudaQuantLinear, DecodeFp8PerChannelMatchesCpu) { run_decode(QuantFormat::kFp8PerChannel); }
TEST(CudaQuantLinear, DecodeInt8PerChannelMatchesCpu) { run_decode(QuantFormat::kInt8PerChannel); }
TEST(CudaQuantLinear, DecodeFp8BlockMatchesCpu) { run_decode(QuantFormat::kFp8Block); }

// A random INT4 weight [n, k] in groups of `group` channels on m random BF16 rows through
// quantized_linear (F32 out, whatever route the overrides in force pick): its relative error
// against the CPU op on the same inputs.
double int4_error_against_cpu(int64_t group, int64_t k, int64_t m, int64_t n, std::mt19937& rng) {
  const QuantizedWeight q = quantize_int4_group(random_host({n, k}, rng, -0.05f, 0.05f), group);
  Tensor x = random_host({m, k}, rng);
  round_to(x, DType::kBF16);
  Tensor ref = Tensor::empty({m, n});
  ops::quantized_linear(x, q, nullptr, ref);
  const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
  const Tensor dx = upload(x, DType::kBF16);
  DeviceBuffer ws(std::max<size_t>(quantized_linear_workspace_bytes(dw, m), 1));
  Tensor y = device_poisoned({m, n}, DType::kF32);
  quantized_linear(test_blas(), dx, dw, nullptr, y, ws.data(), ws.size_bytes(), test_stream());
  KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
  return rel_error(download(y), ref);
}

// W4A16's decode kernels for any group size: the bulk GEMV (path 3) and the register-ring
// decode kernel (path 2, which pairs the chunks of a group when a group has an even number of
// them: 128, 256; also with 3 warps and U = 2, so a warp's chunk run is rounded up to even and
// the last warp's run is short or empty). One group per chunk (64), groups straddling stages
// (192 = 3 chunks), 128 over an odd number of chunks (960 = 15), 256, and one group over all of
// K (per-channel INT4, K not a multiple of 64: padded); M = 1, 2 and 8.
TEST(CudaQuantLinear, Int4DecodeKernelsTakeAnyGroupSize) {
  auto rng = test_rng();
  struct G { int64_t group, k; };
  struct P { int path, kw, u; };
  // Group 128 with an even chunk count (4096, 1024) takes the lean kernel, the rest qdec_kernel.
  for (const G& gk : {G{64, 4160}, G{192, 4224}, G{128, 8256}, G{128, 960}, G{256, 4096},
                      G{1000, 1000}, G{128, 4096}, G{128, 1024}})
    for (int64_t m : {1, 2, 8})
      for (const P& pv : {P{3, 0, 0}, P{2, 0, 0}, P{2, 3, 2}}) {
        SCOPED_TRACE("group " + std::to_string(gk.group) + " K=" + std::to_string(gk.k) +
                     " M=" + std::to_string(m) + " path " + std::to_string(pv.path) + " kw " +
                     std::to_string(pv.kw) + " U " + std::to_string(pv.u));
        set_quant_decode_override(pv.path, pv.kw, pv.u);
        const double err = int4_error_against_cpu(gk.group, gk.k, m, 200, rng);
        set_quant_decode_override(0);
        EXPECT_LE(err, 1e-4);
      }
}

// Past 128 rows W4A16 expands W to BF16 (w4_dequant.cu, one 16-row tile a grid row, the group
// by a shift or, for a chunk count per group that is not a power of two, a division): group
// sizes of 1, 2, 3, 4 and 15 chunks, against the CPU op (each weight rounded to BF16: 5e-3).
TEST(CudaQuantLinear, Int4ExpansionTakesAnyGroupSize) {
  auto rng = test_rng();
  struct G {
    int64_t group, k;
  };
  for (const G& gk : {G{64, 4160}, G{128, 4096}, G{192, 4224}, G{256, 1024}, G{1000, 1000}})
    for (int64_t m : {130, 200}) {
      SCOPED_TRACE("group " + std::to_string(gk.group) + " K=" + std::to_string(gk.k) +
                   " M=" + std::to_string(m));
      EXPECT_LE(int4_error_against_cpu(gk.group, gk.k, m, 208, rng), 5e-3);
    }
}

// Decode kernel and bulk GEMV vs the tensor-core kernel on the same inputs (M = 1..8, and the
// bulk GEMV's 8-bit token tiles at 12 and 16 rows, where path 2 is the tensor-core kernel too):
// same function.
TEST(CudaQuantLinear, DecodeEqualsTensorCorePath) {
  auto rng = test_rng();
  for (QuantFormat f : {QuantFormat::kInt4Group, QuantFormat::kFp8PerChannel,
                        QuantFormat::kInt8PerChannel, QuantFormat::kFp8Block})
    for (int64_t m : {1, 4, 8, 12, 16}) {
      if (m > 8 && (f == QuantFormat::kInt4Group || f == QuantFormat::kFp8Block)) continue;
      const int64_t n = 300, k = 1000;
      const QuantizedWeight q = quantize_as(f, random_host({n, k}, rng, -0.05f, 0.05f));
      const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
      Tensor x = random_host({m, k}, rng);
      round_to(x, DType::kBF16);
      const Tensor dx = upload(x, DType::kBF16);
      DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
      Tensor y1 = device_poisoned({m, n}, DType::kF32), y2 = device_poisoned({m, n}, DType::kF32);
      Tensor y3 = device_poisoned({m, n}, DType::kF32);
      quantized_linear_on_path(2, dx, dw, y1, ws);
      quantized_linear_on_path(1, dx, dw, y2, ws);
      quantized_linear_on_path(3, dx, dw, y3, ws);
      KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
      const Tensor mma = download(y2);
      const double err = rel_error(download(y1), mma), err_bulk = rel_error(download(y3), mma);
      EXPECT_LE(err, 1e-5) << quant_format_name(f) << " M=" << m;
      EXPECT_LE(err_bulk, 1e-5) << quant_format_name(f) << " M=" << m << " (bulk)";
      if (std::getenv("KITE_QUANT_TEST_VERBOSE"))
        std::printf("  decode / bulk vs tensor-core %s M=%ld rel diff %.3g / %.3g\n",
                    std::string(quant_format_name(f)).c_str(), m, err, err_bulk);
    }
}

// The W4A16 GEMM past decode sizes (quant_w4_wgmma.cu, 9 to 128 rows) against the CPU op and
// against the tensor-core kernel (set_w4_gemm_override(-1), set_w4_decode_rows(8)), forced at
// every width (1), at each forced block shape and K split (2; run twice on one workspace, the
// second bit for bit the first: the split-K counters start from zero again and the partials add
// up in one order) and automatic (0: the lean decode kernel where it takes the rows, else the
// GEMM where w4_wgmma_wins): token blocks of 16, 32 and 64 with M just past each (17, 33) and
// several token blocks (100, 128); N of a
// partial 128-row block (300), of one 16-row tile (16), of many blocks (4200) and of a full
// wave (28,672 at K = 256); K padded (1000) and of many stages; group sizes 64 (a group per
// chunk), 128, 192 (groups straddling stages) and 256; bias, F32 and BF16 outputs.
TEST(CudaQuantLinear, Int4GemmPastDecodeSizesMatchesCpu) {
  auto rng = test_rng();
  struct S { int64_t n, k, group; };
  const S shapes[] = {{300, 1000, 128}, {16, 4160, 64}, {4200, 1024, 128}, {200, 4224, 192},
                      {136, 8192, 256}, {28672, 256, 128}};
  const int64_t ms[] = {9, 16, 17, 32, 33, 64, 100, 128};
  int i = 0;
  for (const S& sh : shapes)
    for (int64_t m : ms) {
      ++i;
      if ((i + static_cast<int>(m)) % 3 == 0 && sh.n >= 4200) continue;  // keep the test short
      const QuantizedWeight q =
          quantize_int4_group(random_host({sh.n, sh.k}, rng, -0.05f, 0.05f), sh.group);
      Tensor x = random_host({m, sh.k}, rng);
      round_to(x, DType::kBF16);
      Tensor b = random_host({sh.n}, rng);
      const bool bias = i % 2 == 0;
      Tensor ref = Tensor::empty({m, sh.n});
      ops::quantized_linear(x, q, bias ? &b : nullptr, ref);
      const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
      const Tensor dx = upload(x, DType::kBF16), db = upload(b, DType::kF32);
      const DType out = i % 3 == 0 ? DType::kBF16 : DType::kF32;
      Tensor old_kernel = device_poisoned({m, sh.n}, out);
      {
        set_w4_gemm_override(-1);
        set_w4_decode_rows(8);  // not the lean decode kernel either
        DeviceBuffer ws(std::max<size_t>(quantized_linear_workspace_bytes(dw, m), 1));
        quantized_linear(test_blas(), dx, dw, bias ? &db : nullptr, old_kernel, ws.data(),
                         ws.size_bytes(), test_stream());
        set_w4_decode_rows(32);
      }
      const Tensor old_host = download(old_kernel);
      // Modes 0 (automatic), 1 (the wgmma GEMM, its own plan) and 2 (the wgmma GEMM at a
      // forced tokens x warpgroups shape and K split: 1 none, 7 more than some K's have).
      constexpr std::pair<int, int> kWgShapes[] = {{16, 1}, {16, 2}, {32, 1}, {32, 2}, {64, 1},
                                                   {64, 2}};
      constexpr int kSplits[] = {1, 2, 3, 7};
      for (int mode : {0, 1, 2}) {
        const auto [nt, wg] = mode == 2 ? kWgShapes[i % 6] : std::pair<int, int>{0, 0};
        const int splits = mode == 2 ? kSplits[i % 4] : 0;
        SCOPED_TRACE("N=" + std::to_string(sh.n) + " K=" + std::to_string(sh.k) + " group " +
                     std::to_string(sh.group) + " M=" + std::to_string(m) + " mode " +
                     std::to_string(mode) + " wgmma " + std::to_string(nt) + "x" +
                     std::to_string(wg) + "/" + std::to_string(splits) + (bias ? " bias" : "") +
                     " out " + dtype_label(out));
        set_w4_gemm_override(std::min(mode, 1));
        set_w4_wgmma_shape(nt, wg, splits);
        DeviceBuffer ws(std::max<size_t>(quantized_linear_workspace_bytes(dw, m), 1));
        Tensor y = device_poisoned({m, sh.n}, out);
        quantized_linear(test_blas(), dx, dw, bias ? &db : nullptr, y, ws.data(), ws.size_bytes(),
                         test_stream());
        KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
        const Tensor h = download(y);
        EXPECT_LE(rel_error(h, ref), out == DType::kBF16 ? 5e-3 : 1e-4);
        EXPECT_LE(rel_error(h, old_host), out == DType::kBF16 ? 1e-2 : 1e-5);
        if (mode == 2) {
          Tensor again = device_poisoned({m, sh.n}, out);
          quantized_linear(test_blas(), dx, dw, bias ? &db : nullptr, again, ws.data(),
                           ws.size_bytes(), test_stream());
          KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
          const Tensor h2 = download(again);
          EXPECT_EQ(std::memcmp(h2.raw(), h.raw(), h.size_bytes()), 0);
        }
      }
      set_w4_gemm_override(0);
      set_w4_wgmma_shape(0, 0, 0);
    }
}

// The wgmma GEMM reads x through the prep kernel in the codes' k order (mma_order), composed with
// act order's gather and input_scale's product: forced on (set_w4_gemm_override(1)), every
// combination against the CPU op, at M of one, two and several token blocks, K padded or not.
TEST(CudaQuantLinear, Int4WgmmaTakesActOrderAndInputScale) {
  auto rng = test_rng();
  set_w4_gemm_override(1);
  int i = 0;
  for (int64_t m : {9, 33, 64, 100})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{300, 1000}, {128, 512}})
      for (int opts = 0; opts < 4; ++opts) {
        ++i;
        run_case({QuantFormat::kInt4Group, m, n, k, i % 2 == 0, (opts & 1) != 0, (opts & 2) != 0,
                  i % 3 == 0 ? DType::kBF16 : DType::kF32},
                 rng);
      }
  set_w4_gemm_override(0);
}

// The lean W4 decode kernel past 8 rows (token tiles of 8 dequantizing each chunk once, groups
// of them per weight tile): at the same warps per tile (forced: 8), each tile gets the MMAs and
// scaling an 8-row call gives it, so M rows equal the 8-row slices run one by one bit for bit
// (M = 9 .. 64: 2 or 3 tiles a block, 1 to 3 blocks a weight tile, a partial last tile; taken up
// to 32 rows by default, raised here), F32 and BF16, with a bias; and the CPU op within 1e-4 on
// the automatic warps.
TEST(CudaQuantLinear, Int4WideDecodeEqualsEightRowSlices) {
  auto rng = test_rng();
  set_w4_decode_rows(64);
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{300, 1000}, {4096, 2048}})
    for (int64_t m : {9, 16, 21, 32, 40, 64}) {
      const QuantizedWeight q = quantize_int4_group(random_host({n, k}, rng, -0.05f, 0.05f), 128);
      Tensor x = random_host({m, k}, rng);
      round_to(x, DType::kBF16);
      Tensor b = random_host({n}, rng);
      Tensor ref = Tensor::empty({m, n});
      ops::quantized_linear(x, q, &b, ref);
      const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
      const Tensor dx = upload(x, DType::kBF16), db = upload(b, DType::kF32);
      for (DType out : {DType::kF32, DType::kBF16}) {
        SCOPED_TRACE("N=" + std::to_string(n) + " M=" + std::to_string(m) + " " + dtype_label(out));
        DeviceBuffer ws(std::max<size_t>(quantized_linear_workspace_bytes(dw, m), 1));
        if (out == DType::kF32) {
          Tensor y = device_poisoned({m, n}, out);
          quantized_linear(test_blas(), dx, dw, &db, y, ws.data(), ws.size_bytes(), test_stream());
          EXPECT_LE(rel_error(download(y), ref), 1e-4);
        }
        set_quant_decode_override(0, 8);
        Tensor y = device_poisoned({m, n}, out);
        quantized_linear(test_blas(), dx, dw, &db, y, ws.data(), ws.size_bytes(), test_stream());
        const size_t esize = out == DType::kF32 ? 4 : 2;
        for (int64_t r0 = 0; r0 < m; r0 += 8) {
          const int64_t rows = std::min<int64_t>(8, m - r0);
          const Tensor xs =
              Tensor::wrap(static_cast<uint8_t*>(const_cast<void*>(dx.raw())) + r0 * k * 2,
                           {rows, k}, DType::kBF16, nullptr, Device::kCuda);
          Tensor ys = device_poisoned({rows, n}, out);
          DeviceBuffer ws8(std::max<size_t>(quantized_linear_workspace_bytes(dw, rows), 1));
          quantized_linear(test_blas(), xs, dw, &db, ys, ws8.data(), ws8.size_bytes(),
                           test_stream());
          KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
          std::vector<uint8_t> got(static_cast<size_t>(rows * n) * esize), slice(got.size());
          KITE_CUDA_CHECK(cudaMemcpy(slice.data(), ys.raw(), slice.size(), cudaMemcpyDeviceToHost));
          KITE_CUDA_CHECK(cudaMemcpy(got.data(),
                                     static_cast<const uint8_t*>(y.raw()) + r0 * n * esize,
                                     got.size(), cudaMemcpyDeviceToHost));
          EXPECT_EQ(std::memcmp(got.data(), slice.data(), got.size()), 0) << "rows " << r0;
        }
        set_quant_decode_override(0);
      }
    }
  set_w4_decode_rows(32);
}

TEST(CudaQuantLinear, Int4GroupMatchesCpu) { run_format(QuantFormat::kInt4Group); }
TEST(CudaQuantLinear, Fp8PerChannelMatchesCpu) { run_format(QuantFormat::kFp8PerChannel); }
TEST(CudaQuantLinear, Int8PerChannelMatchesCpu) { run_format(QuantFormat::kInt8PerChannel); }
TEST(CudaQuantLinear, Fp8BlockMatchesCpu) { run_format(QuantFormat::kFp8Block); }

// FP8 per channel beyond 16 rows goes through cuBLASLt (fp8_gemm_lt.h) by one of two routes:
// both forced, then the timed choice, each against the CPU op (BF16 output: the routes'
// only output type), with and without bias and input_scale, M in several power-of-two buckets.
TEST(CudaQuantLinear, Fp8CublasLtRoutesMatchCpu) {
  auto rng = test_rng();
  for (int route : {0, 1, -1}) {
    set_fp8_lt_route_override(route);
    SCOPED_TRACE("route " + std::to_string(route));
    const std::pair<int64_t, int64_t> shapes[] = {{256, 512}, {200, 320}};
    int i = 0;
    for (int64_t m : {17, 64, 130, 300})
      for (const auto& [n, k] : shapes) {
        ++i;
        Case c{QuantFormat::kFp8PerChannel, m, n, k, i % 2 == 0, i % 3 == 0, false,
               DType::kBF16};
        c.bias_dtype = DType::kBF16;  // the cuBLASLt routes take a BF16 bias only
        run_case(c, rng);
        if (route >= 0) {
          EXPECT_EQ(fp8_lt_last_route(), route) << "M=" << m << " N=" << n;
        }
      }
  }
  set_fp8_lt_route_override(-1);
}

// F32 output (an 8-bit lm_head's logits at a decode batch) goes through cuBLASLt too: FP8 past
// 16 rows by the F32 route (outer vectors write BF16 only), INT8 past 32 by its S32 product
// (17-32 rows stay on quant_linear.cu's kernels); against the CPU op at the F32 tolerance, with
// and without a (BF16) bias. FP8 runs a BF16-output case with outer vectors forced first, so the
// F32 case must itself set the last route to 0.
TEST(CudaQuantLinear, EightBitCublasLtWritesF32) {
  auto rng = test_rng();
  for (QuantFormat format : {QuantFormat::kFp8PerChannel, QuantFormat::kInt8PerChannel})
    for (int64_t m : {17, 33, 64, 130}) {
      const bool fp8 = format == QuantFormat::kFp8PerChannel;
      if (fp8) {
        set_fp8_lt_route_override(1);
        Case b{format, m, 1000, 512, false, false, false, DType::kBF16};
        run_case(b, rng);
        EXPECT_EQ(fp8_lt_last_route(), 1) << "M=" << m;
      }
      Case c{format, m, 1000, 512, m != 64, false, false, DType::kF32};
      c.bias_dtype = DType::kBF16;
      run_case(c, rng);
      if (fp8) {
        EXPECT_EQ(fp8_lt_last_route(), 0) << "M=" << m;
        set_fp8_lt_route_override(-1);
      }
    }
}

// A shape whose route is not chosen yet, first met while the stream is capturing (nothing can
// be timed then): the graph still records a cuBLASLt route, and its replay matches the CPU op.
TEST(CudaQuantLinear, Fp8CublasLtCapturesAnUntimedShape) {
  auto rng = test_rng();
  const int64_t m = 48, n = 272, k = 704;  // a shape no other test uses
  const QuantizedWeight q = quantize_fp8_per_channel(random_host({n, k}, rng, -0.05f, 0.05f));
  const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
  Tensor x = random_host({m, k}, rng);
  round_to(x, DType::kBF16);
  Tensor ref = Tensor::empty({m, n});
  ops::quantized_linear(x, q, nullptr, ref);
  const Tensor dx = upload(x, DType::kBF16);
  DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
  Tensor y = device_poisoned({m, n}, DType::kBF16);
  CapturedGraph graph([&] {
    quantized_linear(test_blas(), dx, dw, nullptr, y, ws.data(), ws.size_bytes(), test_stream());
  });
  graph.launch();
  EXPECT_LE(rel_error(download(y), ref), 5e-3);
  EXPECT_EQ(fp8_lt_last_route(), 1);  // untimed: outer vectors, which this GPU has
}

// Captured in a CUDA graph and replayed: same result as the direct call (no allocation or host
// synchronisation inside), for a W8A8 format (activation-quantization kernel + GEMM) and W4.
TEST(CudaQuantLinear, CapturesInGraph) {
  auto rng = test_rng();
  for (QuantFormat f : {QuantFormat::kFp8PerChannel, QuantFormat::kInt4Group}) {
    const int64_t m = 5, n = 320, k = 448;
    QuantizedWeight q = f == QuantFormat::kInt4Group
                            ? quantize_int4_group(random_host({n, k}, rng, -0.05f, 0.05f), 128)
                            : quantize_fp8_per_channel(random_host({n, k}, rng, -0.05f, 0.05f));
    q.input_scale = random_host({k}, rng, 0.5f, 2.0f);
    const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
    Tensor x = random_host({m, k}, rng);
    round_to(x, DType::kBF16);
    const Tensor dx = upload(x, DType::kBF16);
    DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
    Tensor y1 = device_poisoned({m, n}, DType::kF32), y2 = device_poisoned({m, n}, DType::kF32);
    quantized_linear(test_blas(), dx, dw, nullptr, y1, ws.data(), ws.size_bytes(), test_stream());
    CapturedGraph graph([&] {
      quantized_linear(test_blas(), dx, dw, nullptr, y2, ws.data(), ws.size_bytes(), test_stream());
    });
    graph.launch();
    EXPECT_EQ(rel_error(download(y2), download(y1)), 0.0) << quant_format_name(f);
  }
}

TEST(CudaQuantLinear, RejectsShortWorkspaceAndBadShapes) {
  auto rng = test_rng();
  const QuantizedWeight q = quantize_int8_per_channel(random_host({64, 128}, rng));
  const DeviceQuantizedWeight dw = upload_quantized(q, test_stream());
  const Tensor dx = upload(random_host({2, 128}, rng), DType::kBF16);
  Tensor y = device_empty({2, 64}, DType::kF32);
  DeviceBuffer ws(quantized_linear_workspace_bytes(dw, 2));
  EXPECT_THROW(quantized_linear(test_blas(), dx, dw, nullptr, y, ws.data(), 16, test_stream()),
               std::invalid_argument);
  Tensor bad = device_empty({2, 63}, DType::kF32);
  EXPECT_THROW(quantized_linear(test_blas(), dx, dw, nullptr, bad, ws.data(), ws.size_bytes(),
                                test_stream()),
               std::invalid_argument);
}

// Dummy weights run (no NaN/inf from random codes) for every format.
TEST(CudaQuantLinear, DummyWeightsGiveFiniteOutput) {
  auto rng = test_rng();
  for (QuantFormat f : {QuantFormat::kInt4Group, QuantFormat::kFp8PerChannel,
                        QuantFormat::kInt8PerChannel, QuantFormat::kFp8Block}) {
    const int64_t m = 3, n = 300, k = 1000;
    const DeviceQuantizedWeight dw = dummy_quantized(f, n, k, 7, test_stream());
    const Tensor dx = upload(random_host({m, k}, rng), DType::kBF16);
    Tensor y = device_poisoned({m, n}, DType::kBF16);
    DeviceBuffer ws(quantized_linear_workspace_bytes(dw, m));
    quantized_linear(test_blas(), dx, dw, nullptr, y, ws.data(), ws.size_bytes(), test_stream());
    const Tensor h = download(y);
    for (float v : h.f32()) ASSERT_TRUE(std::isfinite(v)) << quant_format_name(f);
  }
}

}  // namespace
}  // namespace kite::cuda
