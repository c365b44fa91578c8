// FP8 E4M3 KV caches on the GPU (issue 7, --kv-cache-dtype fp8): the tensor-core attention
// kernels read FP8 caches (code * k_scale / v_scale) and must equal the CPU op reading the same
// FP8 bytes with the same scales (ops::paged_attention, kernels/cpu) within the BF16 tolerance
// of the BF16-cache tests; rope_and_cache must store exactly the codes the CPU's
// ops::write_cache stores for the same BF16 values. Random batches as attention_mma_test.cpp:
// GQA decode and prefill (head dims 64, 128, 192/128) and MLA decode and prefill (576/512, one
// cache).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include "attention_batch.h"
#include "cuda_test_util.h"
#include "kernels/cuda/attention/paged_attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "quant/fp8_codec.h"

namespace kite::cuda {
namespace {

using namespace testing;

// fp32 host cache -> FP8 host cache holding fp8(x / scale) (NaN stays NaN: 0x7F).
Tensor to_fp8(const Tensor& f32, float scale) {
  Tensor out = Tensor::empty(f32.shape(), DType::kF8E4M3);
  auto* dst = static_cast<uint8_t*>(out.raw());
  const float* src = f32.data<float>();
  for (int64_t i = 0; i < f32.numel(); ++i) dst[i] = fp8e4m3_encode(src[i] / scale);
  return out;
}

Tensor upload_bytes(const Tensor& host) {
  Tensor d = device_empty(host.shape(), host.dtype());
  KITE_CUDA_CHECK(cudaMemcpy(d.raw(), host.raw(), host.size_bytes(), cudaMemcpyHostToDevice));
  return d;
}

// rope_and_cache's step inputs for one token per slot: cos 1, sin 0 over rot_dim dims, so k
// comes out of the rotation unchanged and its cache codes can be compared exactly with the
// CPU's write_cache of the same values.
struct IdentityRope {
  Tensor cos, sin, slots;
  int64_t rot_dim;
  IdentityRope(int64_t rot, const std::vector<int64_t>& slot_ids) : rot_dim(rot) {
    const int64_t t = static_cast<int64_t>(slot_ids.size());
    Tensor ones = Tensor::empty({t, rot / 2});
    std::fill(ones.f32().begin(), ones.f32().end(), 1.0f);
    cos = upload(ones, DType::kF32);
    sin = upload(Tensor::zeros({t, rot / 2}), DType::kF32);
    slots = to_device(std::span<const int64_t>(slot_ids), {t}, test_stream());
  }
  RopeCacheParams params() const {
    RopeCacheParams p;
    p.rot_dim = rot_dim;
    p.cos = &cos;
    p.sin = &sin;
    p.slot_mapping = &slots;
    return p;
  }
};

// How many bytes of a device tensor differ from a host tensor of the same size.
int64_t bytes_differing(const Tensor& device, const Tensor& host) {
  std::vector<uint8_t> got(host.size_bytes());
  KITE_CUDA_CHECK(cudaMemcpy(got.data(), device.raw(), got.size(), cudaMemcpyDeviceToHost));
  const auto* want = static_cast<const uint8_t*>(host.raw());
  int64_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
  return differ;
}

// fp32 host latent cache [blocks, bs, 1, d] -> the model's FP8 form [blocks, bs, 1, d + tail]:
// the first d - tail values as fp8(x / scale), the last tail as BF16 (ops::write_cache's
// bf16_tail, the CPU op that writes it).
Tensor to_fp8_with_tail(const Tensor& f32, float scale, int64_t tail) {
  const int64_t d = f32.size(3), rows = f32.numel() / d;
  Tensor out = Tensor::zeros({f32.size(0), f32.size(1), f32.size(2), d + tail}, DType::kF8E4M3);
  std::vector<int64_t> slots(static_cast<size_t>(rows));
  std::iota(slots.begin(), slots.end(), int64_t{0});
  ops::write_cache(f32.view({rows, d}), slots, out, scale, tail);
  return out;
}

// bf16_tail > 0 (MLA only): the cache keeps the rope key's last bf16_tail dims as BF16.
void check_fp8(const AttnCase& c, bool decode, std::mt19937& rng, int64_t bf16_tail = 0) {
  SCOPED_TRACE(c.name);
  const float k_scale = 0.004f, v_scale = c.shared_kv ? k_scale : 0.0025f;  // |x| <= 1
  HostBatch hb = make_host_batch(c, rng);
  Tensor k8 = bf16_tail > 0 ? to_fp8_with_tail(hb.k_cache, k_scale, bf16_tail)
                            : to_fp8(hb.k_cache, k_scale);
  Tensor v8 = c.shared_kv ? k8 : to_fp8(hb.v_cache, v_scale);
  // Reference: the CPU op over the same FP8 bytes (for MLA, V is the K rows' first dv dims;
  // the CPU op takes them from a separate V cache of those bytes — or, with a tail, from the
  // one cache itself, the form the model runs).
  Tensor v8_ref = v8;
  if (c.shared_kv && bf16_tail == 0) {
    v8_ref = Tensor::empty(hb.v_cache.shape(), DType::kF8E4M3);
    const int64_t rows = hb.v_cache.numel() / c.dv;
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<uint8_t*>(v8_ref.raw()) + r * c.dv,
                  static_cast<const uint8_t*>(k8.raw()) + r * c.dqk, c.dv);
  }
  ops::PagedAttentionParams p;
  p.query_start = hb.query_start;
  p.seq_lens = hb.seq_lens;
  p.block_tables = &hb.tables;
  p.block_size = c.block_size;
  p.scale = attn_scale(c);
  p.k_scale = k_scale;
  p.v_scale = v_scale;
  Tensor ref = Tensor::empty({hb.q.size(0), c.heads, c.dv});
  if (bf16_tail > 0) {
    // The CPU op reading the one latent cache returns all c.dqk dims of it (the model keeps
    // the first dv); the GPU kernel writes only those.
    Tensor full = Tensor::empty({hb.q.size(0), c.heads, c.dqk});
    ops::paged_attention(hb.q, k8, k8, p, full);
    for (int64_t r = 0; r < hb.q.size(0) * c.heads; ++r)
      std::memcpy(ref.data<float>() + r * c.dv, full.data<float>() + r * c.dqk,
                  c.dv * sizeof(float));
  } else {
    ops::paged_attention(hb.q, k8, v8_ref, p, ref);
  }

  DeviceBatch d = upload_batch(c, hb);
  d.k_cache = upload_bytes(k8);
  d.v_cache = c.shared_kv ? d.k_cache : upload_bytes(v8);
  d.args.k_scale = k_scale;
  d.args.v_scale = v_scale;
  Tensor out = device_poisoned(ref.shape(), DType::kBF16);
  if (decode) {
    AttentionWorkspace workspace;
    paged_decode_attention(d.q, d.k_cache, d.v_cache, d.args, workspace, out, test_stream());
  } else {
    paged_prefill_attention(d.q, d.k_cache, d.v_cache, d.args, out, test_stream());
  }
  KITE_EXPECT_CLOSE(download(out), ref, kTolBF16);
}

TEST(CudaAttentionFp8, DecodeAndPrefillMatchCpuOnTheSameCodes) {
  auto rng = test_rng();
  const int64_t dims[][2] = {{64, 64}, {128, 128}, {192, 128}};
  for (const auto& dd : dims)
    for (bool decode : {true, false}) {
      AttnCase c{.name = std::string(decode ? "decode" : "prefill") + " d" + std::to_string(dd[0]),
                 .dtype = DType::kBF16,
                 .seqs = {}};
      c.dqk = dd[0];
      c.dv = dd[1];
      c.kv_heads = 2;
      c.heads = 8;
      c.block_size = 16;
      if (decode)
        c.seqs = {{1, 1}, {65, 1}, {700, 1}};
      else
        c.seqs = {{40, 40}, {129, 64}, {1, 1}};
      check_fp8(c, decode, rng);
      // Several 64-key tiles per split (the automatic split gives these sequences one each):
      // the FP8 decode kernel keeps two tiles' codes in flight while it uses one.
      if (decode)
        for (int splits : {1, 3}) {
          AttnCase s = c;
          s.name += " splits " + std::to_string(splits);
          s.seqs = {{1, 1}, {100, 1}, {150, 1}, {700, 1}, {2049, 1}};  // 1, 2, 3, 11, 33 tiles
          s.num_splits = splits;
          check_fp8(s, decode, rng);
        }
    }
  AttnCase mla{.name = "mla decode", .dtype = DType::kBF16, .seqs = {{33, 1}, {300, 1}}};
  mla.heads = 16;
  mla.kv_heads = 1;
  mla.dqk = 576;
  mla.dv = 512;
  mla.shared_kv = true;
  mla.block_size = 64;
  check_fp8(mla, true, rng);
  // MLA prefill (a prompt over a prefix, a fresh prompt) on the MLA decode kernel.
  mla.name = "mla prefill";
  mla.seqs = {{300, 120}, {70, 70}};
  check_fp8(mla, false, rng);
}

// The model's FP8 latent cache: 512 FP8 codes, then the 64-dim rope key as BF16 (640 bytes a
// row). Decode at batch 1 and 3 with splits, prefill over a prefix and fresh; 128 heads as
// DeepSeek-V3 (eight head blocks reading one tile each).
TEST(CudaAttentionFp8, MlaLatentWithBf16RopeTailMatchesCpu) {
  auto rng = test_rng();
  AttnCase mla{.name = "mla tail decode", .dtype = DType::kBF16, .seqs = {{33, 1}, {300, 1}}};
  mla.heads = 16;
  mla.kv_heads = 1;
  mla.dqk = 576;
  mla.dv = 512;
  mla.shared_kv = true;
  mla.block_size = 64;
  check_fp8(mla, true, rng, 64);
  AttnCase one = mla;
  one.name = "mla tail decode b1 long";
  one.seqs = {{2049, 1}};
  check_fp8(one, true, rng, 64);
  AttnCase wide = mla;
  wide.name = "mla tail decode 128 heads";
  wide.heads = 128;
  wide.seqs = {{1, 1}, {97, 1}};
  wide.block_size = 16;
  check_fp8(wide, true, rng, 64);
  mla.name = "mla tail prefill";
  mla.seqs = {{300, 120}, {70, 70}, {1, 1}};
  check_fp8(mla, false, rng, 64);
}

// rope_and_cache's MLA form: k [T, 1, 576] rotated over dims [512, 576) and stored as 512 FP8
// codes plus the 64 rotated dims as BF16, byte for byte what the CPU's write_cache stores.
TEST(CudaAttentionFp8, RopeAndCacheStoresTheLatentWithItsBf16Tail) {
  auto rng = test_rng();
  const int64_t t = 5, dim = 576, rot = 64, tail = 64, blocks = 2, bs = 16;
  const float k_scale = 0.02f;
  Tensor k = random_host({t, 1, dim}, rng, -4.0f, 4.0f);
  k.data<float>()[3] = 50.0f;  // saturates at 448 * k_scale
  round_to(k, DType::kBF16);
  std::vector<int64_t> slots = {0, 15, 16, 31, -1};
  const IdentityRope rope(rot, slots);
  Tensor dk = upload(k, DType::kBF16);
  Tensor cache = device_empty({blocks, bs, 1, dim + tail}, DType::kF8E4M3);
  KITE_CUDA_CHECK(cudaMemset(cache.raw(), 0, cache.size_bytes()));
  RopeCacheParams p = rope.params();
  p.k = &dk;
  p.k_rot_offset = dim - rot;
  p.k_cache = &cache;
  p.k_scale = k_scale;
  p.k_bf16_tail = tail;
  rope_and_cache(p, test_stream());
  KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));

  Tensor ref = Tensor::zeros({blocks, bs, 1, dim + tail}, DType::kF8E4M3);
  ops::write_cache(k.slice_rows(0, 4), std::span<const int64_t>(slots.data(), 4), ref, k_scale,
                   tail);
  EXPECT_EQ(bytes_differing(cache, ref), 0) << "latent cache bytes differ from the CPU's";

  // Without the tail the same cache is the wrong shape: a clear error, nothing written.
  p.k_bf16_tail = 0;
  EXPECT_THROW(rope_and_cache(p, test_stream()), std::invalid_argument);
}

TEST(CudaAttentionFp8, RopeAndCacheStoresTheCpuCodes) {
  auto rng = test_rng();
  const int64_t t = 7, heads = 2, dim = 128, blocks = 4, bs = 16;
  const float k_scale = 0.01f, v_scale = 0.02f;
  Tensor k = random_host({t, heads, dim}, rng, -3.0f, 3.0f);
  Tensor v = random_host({t, heads, dim}, rng, -6.0f, 6.0f);
  v.data<float>()[5] = 100.0f;  // saturates at 448 * v_scale
  round_to(k, DType::kBF16);
  round_to(v, DType::kBF16);
  std::vector<int64_t> slots = {3, 17, 18, 40, 63, 0, -1};  // -1: padding, not written
  const IdentityRope rope(dim, slots);

  Tensor dk = upload(k, DType::kBF16), dv = upload(v, DType::kBF16);
  Tensor k_cache = device_empty({blocks, bs, heads, dim}, DType::kF8E4M3);
  Tensor v_cache = device_empty({blocks, bs, heads, dim}, DType::kF8E4M3);
  KITE_CUDA_CHECK(cudaMemset(k_cache.raw(), 0, k_cache.size_bytes()));
  KITE_CUDA_CHECK(cudaMemset(v_cache.raw(), 0, v_cache.size_bytes()));
  RopeCacheParams p = rope.params();
  p.k = &dk;
  p.v = &dv;
  p.k_cache = &k_cache;
  p.v_cache = &v_cache;
  p.k_scale = k_scale;
  p.v_scale = v_scale;
  rope_and_cache(p, test_stream());
  KITE_CUDA_CHECK(cudaStreamSynchronize(test_stream()));

  Tensor k_ref = Tensor::zeros({blocks, bs, heads, dim}, DType::kF8E4M3);
  Tensor v_ref = Tensor::zeros({blocks, bs, heads, dim}, DType::kF8E4M3);
  // The CPU op refuses the padding slot: it writes the first six tokens.
  const std::span<const int64_t> real(slots.data(), 6);
  ops::write_cache(k.slice_rows(0, 6), real, k_ref, k_scale);
  ops::write_cache(v.slice_rows(0, 6), real, v_ref, v_scale);
  for (auto [dev, ref, name] : {std::tuple{&k_cache, &k_ref, "k"}, std::tuple{&v_cache, &v_ref, "v"}}) {
    EXPECT_EQ(bytes_differing(*dev, *ref), 0) << name << " cache: codes differ from the CPU's";
  }
}

}  // namespace
}  // namespace kite::cuda
