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
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cuda/backend/cuda_backend.h"
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
                                    LoadFormat format = LoadFormat::kAuto) {
  cuda::register_cuda_backend();
  LoadOptions o;
  o.device = device;
  o.quantization = method;
  o.load_format = format;
  if (format == LoadFormat::kAuto && method != QuantMethod::kNone) {
    auto config = load_model_config(dir);
    if (!config.ok()) return config.status();
    auto plan = make_base_plan(dir, *config, method);
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
  };
  // llama3's MLP is 160 wide: its down_proj has a partial INT4 group and a padded K.
  const Case cases[] = {{"llama3", QuantMethod::kFp8},  {"qwen2", QuantMethod::kFp8},
                        {"llama3", QuantMethod::kInt8}, {"qwen2", QuantMethod::kInt8},
                        {"llama3", QuantMethod::kInt4}, {"qwen2", QuantMethod::kInt4}};
  std::vector<int32_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 53 + 7) % 500);
  for (const Case& c : cases) {
    const std::string name = c.model + " " + std::string(quant_method_name(c.method));
    SCOPED_TRACE(name);
    const std::string dir = source_dir() + "/tests/fixtures/models/" + c.model;
    auto cpu = load(dir, Device::kCpu, c.method);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    auto cpu_plain = load(dir, Device::kCpu, QuantMethod::kNone);
    ASSERT_TRUE(cpu_plain.ok()) << cpu_plain.status().message();
    auto gpu = load(dir, Device::kCuda, c.method);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    const auto want = prompt_logits(**cpu, ids), got = prompt_logits(**gpu, ids);
    const auto plain = prompt_logits(**cpu_plain, ids);
    ASSERT_EQ(got.size(), want.size());
    const double err = rel_error(got, want), quant_err = rel_error(want, plain);
    std::printf("  %s: relative error GPU vs CPU quantized model %.2e (CPU quantized vs "
                "unquantized %.2e)\n",
                name.c_str(), err, quant_err);
    if (c.method == QuantMethod::kInt4)
      EXPECT_LT(err, 3e-2);
    else
      EXPECT_LT(err, std::max(3e-2, quant_err));
  }
}

TEST(CudaQuantModel, DummyQuantizedWeightsRun) {
  for (QuantMethod m : {QuantMethod::kFp8, QuantMethod::kInt8, QuantMethod::kInt4}) {
    auto gpu = load(source_dir() + "/tests/fixtures/models/qwen2", Device::kCuda, m,
                    LoadFormat::kDummy);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    const auto logits = prompt_logits(**gpu, {1, 2, 3, 4, 5});
    for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << quant_method_name(m);
  }
}

}  // namespace
}  // namespace kite
