// End to end on the GPU: every fixture model and the shipped kite-tiny, loaded on the CUDA
// backend (BF16 weights, activations and KV cache), against transformers' fp32 references:
//   - prompt logits within BF16 tolerance: relative error < 3e-2 for the dense models and
//     kite-tiny, < 6e-2 for the random-weight MLA fixtures (the absorbed latent products run
//     in BF16 over activations of a wider range than a trained model's; measured 0.8-4.9e-2);
//   - greedy continuations equal to transformers' — prefilled whole and in chunks of 5, then
//     decoded token by token through the paged decode kernel — except where the fp32
//     reference itself has a near-tie: at the first differing token, kite's fp32 CPU model
//     (equal to transformers within 1e-4, tests/e2e) is teacher-forced to that point and the
//     two candidates' logits must be within 2 % of the row's largest magnitude;
//   - the random-weight MoE fixtures deepseek_v2/v3 are the exception: their untrained
//     routers put experts within BF16 rounding of each other for a few tokens, and such a
//     token takes other experts on the GPU than in fp32 and changes wholesale (the host and the
//     device MoE paths give the same numbers; the same models with every expert chosen,
//     deepseek_v*_all_experts, and the trained kite-tiny pass the strict checks). For them
//     the two short prompts (1 and 7 tokens) must be within 6e-2 and the first greedy token
//     must match (up to a near-tie); longer prompts and the rest of their continuations are
//     printed, not asserted;
//   - one mixed batch (all prompts prefilled together, scattered blocks) gives each prompt's
//     last-token logits as its own run did.
// Paths are relative to the repository root (run from there, as tools/cuda/run_on_device.sh
// does) or to $KITE_SOURCE_DIR.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "kernels/cuda/backend/cuda_backend.h"
#include "model/model.h"
#include "runtime/model_runner.h"

namespace kite {
namespace {

std::string source_dir() {
  const char* env = std::getenv("KITE_SOURCE_DIR");
  return env && *env ? env : ".";
}

struct Case {
  std::string name, model_dir, expected_dir;
  bool random_router = false;  // see the file comment
  double tolerance = 3e-2;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string m : {"llama3", "qwen2", "deepseek_v2", "deepseek_v3",
                              "deepseek_v2_all_experts", "deepseek_v3_all_experts"}) {
    const std::string d = source_dir() + "/tests/fixtures/models/" + m;
    const bool mla = m.rfind("deepseek", 0) == 0;
    out.push_back({m, d, d, m == "deepseek_v2" || m == "deepseek_v3", mla ? 6e-2 : 3e-2});
  }
  out.push_back({"kite_tiny", source_dir() + "/models/kite-tiny",
                 source_dir() + "/tests/fixtures/kite_tiny"});
  return out;
}

struct Prompt {
  std::vector<int32_t> ids, greedy;
};

std::vector<Prompt> prompts(const Case& c) {
  std::ifstream f(c.expected_dir + "/expected.json");
  const nlohmann::json meta = nlohmann::json::parse(f);
  std::vector<Prompt> out;
  for (size_t p = 0; p < meta["prompts"].size(); ++p) {
    const auto& rec = meta["prompts"][p];
    if (rec.is_object())
      out.push_back({rec["ids"].get<std::vector<int32_t>>(), rec["greedy"].get<std::vector<int32_t>>()});
    else
      out.push_back({rec.get<std::vector<int32_t>>(), meta["greedy"][p].get<std::vector<int32_t>>()});
  }
  return out;
}

std::unique_ptr<Model> load(const std::string& dir, Device device) {
  cuda::register_cuda_backend();
  LoadOptions o;
  o.device = device;
  auto m = load_model(dir, o);
  if (!m.ok()) throw std::runtime_error(m.status().message());
  return std::move(*m);
}

double rel_error(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Greedy decoding on `model` with prefill chunks of `chunk` tokens (0: whole prompt).
std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& prompt, size_t new_tokens,
                            size_t chunk) {
  const int64_t bs = 16;
  const int64_t blocks = (prompt.size() + new_tokens + bs) / bs + 1;
  KvCache cache(model.kv_cache_spec(), blocks * 2 + 3, bs, model.backend());
  ModelRunner runner(model, cache);
  std::vector<int32_t> table(blocks);
  for (int64_t i = 0; i < blocks; ++i) table[i] = static_cast<int32_t>((i * 7 + 3) % (blocks * 2 + 3));
  std::vector<int32_t> seq = prompt, out;
  size_t computed = 0;
  while (out.size() < new_tokens) {
    size_t n = seq.size() - computed;
    if (chunk && n > chunk) n = chunk;
    const bool last = computed + n == seq.size();
    SequenceChunk c{std::span<const int32_t>(seq.data() + computed, n),
                    static_cast<int32_t>(computed), table, last ? LogitsMode::kLast : LogitsMode::kNone};
    Tensor logits = runner.execute({&c, 1});
    computed += n;
    if (last) {
      out.push_back(argmax(logits.data<float>(), logits.size(1)));
      seq.push_back(out.back());
    }
  }
  return out;
}

// Last-token logits of `seq` on `model` (one prefill).
std::vector<float> last_logits(Model& model, const std::vector<int32_t>& seq) {
  const int64_t bs = 16, blocks = static_cast<int64_t>(seq.size()) / bs + 1;
  KvCache cache(model.kv_cache_spec(), blocks, bs, model.backend());
  ModelRunner runner(model, cache);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  SequenceChunk c{seq, 0, table, LogitsMode::kLast};
  Tensor l = runner.execute({&c, 1});
  return {l.data<float>(), l.data<float>() + l.numel()};
}

class CudaModel : public ::testing::TestWithParam<Case> {};

TEST_P(CudaModel, LogitsWithinBf16OfTransformers) {
  const Case& c = GetParam();
  auto model = load(c.model_dir, Device::kCuda);
  auto expected = WeightStore::open(c.expected_dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  const int64_t vocab = model->config().vocab_size;
  const auto ps = prompts(c);
  for (size_t p = 0; p < ps.size(); ++p) {
    const auto& ids = ps[p].ids;
    const int64_t bs = 16, blocks = static_cast<int64_t>(ids.size()) / bs + 1;
    KvCache cache(model->kv_cache_spec(), blocks + 4, bs, model->backend());
    ModelRunner runner(*model, cache);
    std::vector<int32_t> table(blocks);
    std::iota(table.begin(), table.end(), 4);
    SequenceChunk chunk{ids, 0, table, LogitsMode::kAll};
    Tensor logits = runner.execute({&chunk, 1});
    auto want = expected->get_f32("logits." + std::to_string(p),
                                  {static_cast<int64_t>(ids.size()), vocab});
    ASSERT_TRUE(want.ok()) << want.status().message();
    const double err = rel_error(logits.data<float>(), want->data<float>(), logits.numel());
    int64_t good_rows = 0;
    for (size_t r = 0; r < ids.size(); ++r)
      good_rows += rel_error(logits.data<float>() + r * vocab, want->data<float>() + r * vocab,
                             vocab) < 3e-2;
    std::printf("  %s prompt %zu (%zu tokens): relative error vs transformers fp32 %.2e, "
                "%lld/%zu rows within 3e-2\n",
                c.name.c_str(), p, ids.size(), err, static_cast<long long>(good_rows), ids.size());
    if (!c.random_router || ids.size() <= 7) EXPECT_LT(err, c.tolerance) << c.name << " prompt " << p;
  }
}

TEST_P(CudaModel, GreedyMatchesTransformersUpToNearTies) {
  const Case& c = GetParam();
  auto gpu = load(c.model_dir, Device::kCuda);
  std::unique_ptr<Model> cpu;  // loaded only if a continuation differs
  for (const auto& p : prompts(c)) {
    for (size_t chunk : {size_t{0}, size_t{5}}) {
      const auto got = greedy(*gpu, p.ids, p.greedy.size(), chunk);
      size_t i = 0;
      while (i < got.size() && got[i] == p.greedy[i]) ++i;
      std::printf("  %s prompt of %zu tokens, chunk %zu: %zu/%zu greedy tokens equal\n",
                  c.name.c_str(), p.ids.size(), chunk, i, got.size());
      if (i == got.size() || (c.random_router && i > 0)) continue;
      if (!cpu) cpu = load(c.model_dir, Device::kCpu);
      std::vector<int32_t> prefix = p.ids;
      prefix.insert(prefix.end(), p.greedy.begin(), p.greedy.begin() + i);
      const auto ref = last_logits(*cpu, prefix);
      float scale = 0;
      for (float v : ref) scale = std::max(scale, std::fabs(v));
      const float gap = ref[p.greedy[i]] - ref[got[i]];
      std::printf("    first difference at %zu: reference margin %.4g (row max |logit| %.4g)\n", i,
                  gap, scale);
      EXPECT_LE(gap, 0.02f * scale) << c.name << ": token " << i << " differs without a near-tie";
    }
  }
}

TEST_P(CudaModel, MixedBatchEqualsSeparateRuns) {
  const Case& c = GetParam();
  auto model = load(c.model_dir, Device::kCuda);
  const auto ps = prompts(c);
  const int64_t bs = 16;
  std::vector<std::vector<int32_t>> tables;
  int32_t next_block = 0;
  for (const auto& p : ps) {
    std::vector<int32_t> t(p.ids.size() / bs + 1);
    for (auto& b : t) b = next_block++;
    std::reverse(t.begin(), t.end());  // blocks out of order on purpose
    tables.push_back(t);
  }
  KvCache cache(model->kv_cache_spec(), next_block, bs, model->backend());
  ModelRunner runner(*model, cache);
  std::vector<SequenceChunk> chunks;
  for (size_t i = 0; i < ps.size(); ++i) chunks.push_back({ps[i].ids, 0, tables[i], LogitsMode::kLast});
  Tensor batch = runner.execute(chunks);
  const int64_t vocab = batch.size(1);
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto alone = last_logits(*model, ps[i].ids);
    const double err = rel_error(batch.data<float>() + i * vocab, alone.data(), vocab);
    EXPECT_LT(err, 1e-2) << c.name << " prompt " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModel, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kite
