// Quantized models on the GPU (issue 7): the dense fixtures loaded with --quantization on the
// CUDA backend (the same host quantization, codes uploaded to the kernels' layout) against the
// same quantized model on the CPU backend (the fp32 reference of kernels/quant_ops.h). The
// weights are identical, so what differs is BF16 activations and KV cache on the GPU. For W4A16
// the prompt logits must agree within the BF16 tolerance the unquantized models meet (3e-2
// relative, tests/cuda/model_test.cpp). For W8A8 the activations are quantized per token, and a
// BF16-rounded activation lands on another FP8 / INT8 code now and then (one FP8 step is 6 %),
// so the GPU-vs-CPU difference is of the order of the quantization error itself: it must stay
// below the CPU quantized model's own distance from the unquantized one (and below 3e-2 where
// that is smaller). int8 / awq use the base plan (no calibration: the fixtures have no
// tokenizer); the kernels are the same. Dummy quantized weights must run and give finite logits.
// And FP8 KV caches (below).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "kernels/cuda/backend/cuda_backend.h"
#include "kernels/cuda/quant/quant_linear.h"
#include "model/model.h"
#include "quant/quant_plan.h"
#include "runtime/model_runner.h"

namespace kite {
namespace {

std::string source_dir() {
  const char* env = std::getenv("KITE_SOURCE_DIR");
  return env && *env ? env : ".";
}

Result<std::unique_ptr<Model>> load(const std::string& dir, Device device, QuantMethod method,
                                    LoadFormat format = LoadFormat::kAuto,
                                    QuantMethod lm_head = QuantMethod::kNone) {
  cuda::register_cuda_backend();
  LoadOptions o;
  o.device = device;
  o.quant.method = method;
  o.quant.lm_head_method = lm_head;
  o.load_format = format;
  if (format == LoadFormat::kAuto && method != QuantMethod::kNone) {
    auto config = load_model_config(dir);
    if (!config.ok()) return config.status();
    auto plan = make_base_plan(dir, *config, o.quant);
    if (!plan.ok()) return plan.status();
    o.plan = *plan;
  }
  return load_model(dir, o);
}

std::vector<float> prompt_logits(Model& model, const std::vector<int32_t>& ids) {
  const int64_t bs = 16, blocks = static_cast<int64_t>(ids.size()) / bs + 1;
  KvCache cache(model.kv_cache_spec(), blocks, bs, model.backend());
  ModelRunner runner(model, cache);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  SequenceChunk c{ids, 0, table, LogitsMode::kAll};
  Tensor l = runner.execute({&c, 1});
  return {l.data<float>(), l.data<float>() + l.numel()};
}

double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

TEST(CudaQuantModel, LogitsMatchTheCpuQuantizedModel) {
  struct Case {
    std::string model;
    QuantMethod method;
    // --lm-head-quantization (qwen2 ties lm_head to the embedding)
    QuantMethod lm_head = QuantMethod::kNone;
  };
  // llama3's MLP is 160 wide: its down_proj has a partial INT4 group and a padded K.
  using Q = QuantMethod;
  const Case cases[] = {{"llama3", Q::kFp8},
                        {"qwen2", Q::kFp8},
                        {"llama3", Q::kInt8},
                        {"qwen2", Q::kInt8},
                        {"llama3", Q::kInt4},
                        {"qwen2", Q::kInt4},
                        {"llama3", Q::kFp8, Q::kFp8},
                        {"qwen2", Q::kInt8, Q::kInt8},
                        {"llama3", Q::kInt4, Q::kInt4},
                        {"qwen2", Q::kInt4, Q::kInt4},
                        {"llama3", Q::kInt4, Q::kInt8},
                        {"qwen2", Q::kInt4, Q::kFp8}};
  std::vector<int32_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 53 + 7) % 500);
  for (const Case& c : cases) {
    const std::string name =
        c.model + " " + std::string(quant_method_name(c.method)) +
        (c.lm_head != Q::kNone ? " + " + std::string(quant_method_name(c.lm_head)) + " lm_head"
                               : "");
    SCOPED_TRACE(name);
    const std::string dir = source_dir() + "/tests/fixtures/models/" + c.model;
    auto cpu = load(dir, Device::kCpu, c.method, LoadFormat::kAuto, c.lm_head);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    auto cpu_plain = load(dir, Device::kCpu, QuantMethod::kNone);
    ASSERT_TRUE(cpu_plain.ok()) << cpu_plain.status().message();
    auto gpu = load(dir, Device::kCuda, c.method, LoadFormat::kAuto, c.lm_head);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    const auto want = prompt_logits(**cpu, ids), got = prompt_logits(**gpu, ids);
    const auto plain = prompt_logits(**cpu_plain, ids);
    ASSERT_EQ(got.size(), want.size());
    const double err = rel_error(got, want), quant_err = rel_error(want, plain);
    std::printf(
        "  %s: relative error GPU vs CPU quantized model %.2e (CPU quantized vs "
        "unquantized %.2e)\n",
        name.c_str(), err, quant_err);
    // Weight-only throughout: only summation order differs. With W8A8 anywhere (an 8-bit
    // lm_head too), BF16 activations land on other codes now and then.
    if (c.method == Q::kInt4 && (c.lm_head == Q::kNone || c.lm_head == Q::kInt4))
      EXPECT_LT(err, 3e-2);
    else
      EXPECT_LT(err, std::max(3e-2, quant_err));
  }
}

// --kv-cache-dtype fp8 on the GPU: the dense fixtures with FP8 caches (scale 1 per layer, the
// default without calibration) against the CPU with FP8 caches, prefill then five decode
// steps. As for W8A8, BF16 values land on other FP8 codes now and then: the GPU and the CPU
// each round differently perturbed values, so their distance is up to about sqrt(2) times one
// rounding's error. The bound is 1.5x the CPU's own FP8-vs-F32 cache distance (or 3e-2 where
// that is smaller); the kernels themselves are held to the CPU's codes exactly
// (attention_fp8_test.cpp).
std::vector<std::vector<float>> prefill_then_decode(Model& model, DType kv_dtype,
                                                    const std::vector<int32_t>& ids) {
  const int64_t bs = 16, blocks = 8;
  KvCacheSpec spec = model.kv_cache_spec();
  spec.dtype = kv_dtype;
  KvCache cache(spec, blocks, bs, model.backend());
  ModelRunner runner(model, cache);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::vector<std::vector<float>> out;
  SequenceChunk c{ids, 0, table, LogitsMode::kLast};
  Tensor l = runner.execute({&c, 1});
  out.emplace_back(l.data<float>(), l.data<float>() + l.numel());
  for (int step = 0; step < 5; ++step) {
    const int32_t token = 11 + 13 * step;
    SequenceChunk d{std::span<const int32_t>(&token, 1), static_cast<int32_t>(ids.size()) + step,
                    table, LogitsMode::kLast};
    l = runner.execute({&d, 1});
    out.emplace_back(l.data<float>(), l.data<float>() + l.numel());
  }
  return out;
}

TEST(CudaQuantModel, Fp8KvCacheMatchesTheCpu) {
  std::vector<int32_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 31 + 5) % 500);
  for (const std::string m : {"llama3", "qwen2"}) {
    SCOPED_TRACE(m);
    const std::string dir = source_dir() + "/tests/fixtures/models/" + m;
    auto cpu = load(dir, Device::kCpu, QuantMethod::kNone);
    auto gpu = load(dir, Device::kCuda, QuantMethod::kNone);
    ASSERT_TRUE(cpu.ok() && gpu.ok());
    const auto want = prefill_then_decode(**cpu, DType::kF8E4M3, ids);
    const auto plain = prefill_then_decode(**cpu, DType::kF32, ids);
    const auto got = prefill_then_decode(**gpu, DType::kF8E4M3, ids);
    for (size_t s = 0; s < want.size(); ++s) {
      const double err = rel_error(got[s], want[s]), kv_err = rel_error(want[s], plain[s]);
      std::printf("  %s fp8 kv step %zu: GPU vs CPU %.2e (CPU fp8 vs f32 cache %.2e)\n", m.c_str(),
                  s, err, kv_err);
      EXPECT_LT(err, std::max(3e-2, 1.5 * kv_err)) << "step " << s;
    }
  }
}

// FP8 / INT8 decode at one row folds each residual-add + RMSNorm into the GEMV that reads its
// output (kernels/folded_norm.h): q/k/v after the first layer, gate_up, and an 8-bit
// lm_head. The fixtures' hidden sizes are at most 4,096, where the fold's sums are the norm's,
// so the steps equal those of path 4 (the norm, then the GEMV on codes made before it) exactly.
TEST(CudaQuantModel, FoldedNormsDecodeAsTheUnfoldedSteps) {
  struct Case {
    std::string model;
    QuantMethod method, lm_head;
  };
  using Q = QuantMethod;
  const Case cases[] = {
      {"llama3", Q::kFp8, Q::kFp8}, {"qwen2", Q::kInt8, Q::kNone}, {"qwen2", Q::kFp8, Q::kInt8}};
  std::vector<int32_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 3) % 500);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + " " + std::string(quant_method_name(c.method)) + " lm_head " +
                 std::string(quant_method_name(c.lm_head)));
    auto gpu = load(source_dir() + "/tests/fixtures/models/" + c.model, Device::kCuda, c.method,
                    LoadFormat::kAuto, c.lm_head);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    const DType kv = (*gpu)->kv_cache_spec().dtype;
    const int64_t before = cuda::folded_norm_launches();
    const auto folded = prefill_then_decode(**gpu, kv, ids);
    const int64_t layers = (*gpu)->config().num_hidden_layers;
    const int64_t per_step = 2 * layers - 1 + (c.lm_head != Q::kNone ? 1 : 0);
    // Every step the host runs (a replayed graph step runs none) folds them all.
    const int64_t launches = cuda::folded_norm_launches() - before;
    EXPECT_GE(launches, per_step);
    EXPECT_EQ(launches % per_step, 0);
    cuda::set_quant_decode_override(4);
    const auto unfolded = prefill_then_decode(**gpu, kv, ids);
    cuda::set_quant_decode_override(0);
    ASSERT_EQ(folded.size(), unfolded.size());
    for (size_t s = 0; s < folded.size(); ++s) EXPECT_EQ(folded[s], unfolded[s]) << "step " << s;
  }
}

// MLA with the FP8 latent cache (512 FP8 codes + the 64-dim rope key as BF16 per token) on the
// GPU, end to end through the model: the backend writes the rope key as BF16
// (fp8_cache_bf16_tail), the MLA kernel reads it back, prefill and decode. No fixture has
// DeepSeek's 576-wide latent (the only one the GPU's MLA kernel reads) and the GPU's dummy
// matrices are not the CPU's (cuda_backend.cpp), so this is a small DeepSeek-V2 of dummy
// weights with that latent (2 layers: dense, then 4 routed experts top-2 + 1 shared; 4 heads),
// its FP8-cache logits against its own BF16-cache logits. The kernels are held to the CPU's
// codes and outputs exactly (attention_fp8_test.cpp); what this catches is plumbing that
// breaks the cache outright (a rope key unwritten or read from the wrong bytes gives unrelated
// scores), within a bound well above what E4M3 rounding of the latent moves the logits here
// (4-7 %, measured on the H200; the CPU's own FP8-vs-F32 distance on its dummy weights: 4-15 %).
std::string write_mla576_config() {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kite_mla576_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
    "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 128,
    "num_hidden_layers": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "n_group": 1, "topk_group": 1, "topk_method": "greedy", "scoring_func": "softmax",
    "norm_topk_prob": false, "routed_scaling_factor": 1.0,
    "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": null,
    "kv_lora_rank": 512, "qk_nope_head_dim": 32, "qk_rope_head_dim": 64, "v_head_dim": 32,
    "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 10000,
    "max_position_embeddings": 4096, "vocab_size": 512, "tie_word_embeddings": false,
    "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16"})";
  return dir.string();
}

TEST(CudaQuantModel, MlaFp8LatentCacheTracksTheBf16Cache) {
  const std::string dir = write_mla576_config();
  auto gpu = load(dir, Device::kCuda, QuantMethod::kNone, LoadFormat::kDummy);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  KvCacheSpec spec = (*gpu)->kv_cache_spec();
  spec.dtype = DType::kF8E4M3;
  EXPECT_EQ(spec.k_row(), 640);  // 512 codes + 64 BF16 values
  EXPECT_TRUE((*gpu)->backend().reads_fp8_kv(576, 576, true));
  EXPECT_FALSE((*gpu)->backend().reads_fp8_kv(80, 80, true));  // kite-tiny's latent: refused
  std::vector<int32_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 31 + 5) % 500);
  const auto got = prefill_then_decode(**gpu, DType::kF8E4M3, ids);
  const auto want = prefill_then_decode(**gpu, DType::kBF16, ids);
  for (size_t s = 0; s < want.size(); ++s) {
    const double err = rel_error(got[s], want[s]);
    std::printf("  mla576 step %zu: FP8 vs BF16 latent cache %.2e\n", s, err);
    EXPECT_LT(err, 0.15) << "step " << s;
  }
  std::filesystem::remove_all(dir);
}

// kite-tiny (trained MLA + MoE with a shared expert) quantized: prefill, then decode steps,
// which on the GPU run the stacked q_a / kv_a projection split into two outputs and the fused
// decode MoE for the routed experts with the quantized shared expert run and added on its own.
// The CUDA backend keeps the routed experts in BF16 (ARCHITECTURE.md) while the CPU quantizes
// them, so the GPU model lies between the CPU quantized and unquantized models: it must be
// within 1.5x the CPU quantized model's own distance from the unquantized one of both (3e-2
// where that is larger) — dropping or doubling the shared expert would leave that band. (The
// random-weight MLA fixtures are no use here: quantization alone moves their logits 16-96 %.)
TEST(CudaQuantModel, KiteTinyDecodeMatchesTheCpuQuantizedModel) {
  std::vector<int32_t> ids(21);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 5) % 500);
  const std::string dir = source_dir() + "/models/kite-tiny";
  for (QuantMethod method : {QuantMethod::kFp8, QuantMethod::kInt4}) {
    const std::string name = "kite-tiny " + std::string(quant_method_name(method));
    SCOPED_TRACE(name);
    auto cpu = load(dir, Device::kCpu, method);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    auto cpu_plain = load(dir, Device::kCpu, QuantMethod::kNone);
    ASSERT_TRUE(cpu_plain.ok()) << cpu_plain.status().message();
    auto gpu = load(dir, Device::kCuda, method);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    const auto want = prefill_then_decode(**cpu, (*cpu)->kv_cache_spec().dtype, ids);
    const auto plain = prefill_then_decode(**cpu_plain, (*cpu_plain)->kv_cache_spec().dtype, ids);
    const auto got = prefill_then_decode(**gpu, (*gpu)->kv_cache_spec().dtype, ids);
    ASSERT_EQ(got.size(), want.size());
    for (size_t step = 0; step < got.size(); ++step) {
      const double err = rel_error(got[step], want[step]);
      const double err_plain = rel_error(got[step], plain[step]);
      const double quant_err = rel_error(want[step], plain[step]);
      std::printf(
          "  %s step %zu: GPU vs CPU quantized %.2e, vs CPU unquantized %.2e (CPU "
          "quantized vs unquantized %.2e)\n",
          name.c_str(), step, err, err_plain, quant_err);
      const double bound = std::max(3e-2, 1.5 * quant_err);
      EXPECT_LT(err, bound) << "step " << step;
      EXPECT_LT(err_plain, bound) << "step " << step;
    }
  }
}

TEST(CudaQuantModel, DummyQuantizedWeightsRun) {
  for (QuantMethod m : {QuantMethod::kFp8, QuantMethod::kInt8, QuantMethod::kInt4})
    for (const char* model : {"qwen2", "llama3"})  // tied and untied lm_head
      for (QuantMethod lm_head : {QuantMethod::kNone, m, QuantMethod::kInt8}) {
        SCOPED_TRACE(std::string(model) + " " + std::string(quant_method_name(m)) + " + " +
                     std::string(quant_method_name(lm_head)) + " lm_head");
        auto gpu = load(source_dir() + "/tests/fixtures/models/" + model, Device::kCuda, m,
                        LoadFormat::kDummy, lm_head);
        ASSERT_TRUE(gpu.ok()) << gpu.status().message();
        const auto logits = prompt_logits(**gpu, {1, 2, 3, 4, 5});
        for (float v : logits) ASSERT_TRUE(std::isfinite(v));
      }
}

}  // namespace
}  // namespace kite
