// End to end on the GPU: every fixture model and the shipped kite-tiny, loaded on the CUDA
// backend (BF16 weights, activations and KV cache), against transformers' fp32 references:
//   - prompt logits within BF16 tolerance, prefilled at once and fed one token per step
//     (the decode path): relative error < 3e-2 for the dense models and
//     kite-tiny, < 6e-2 for the random-weight MLA fixtures (the absorbed latent products run
//     in BF16 over activations of a wider range than a trained model's; measured 0.8-4.9e-2);
//   - greedy continuations equal to transformers' — prefilled whole and in chunks of 5, then
//     decoded token by token through the paged decode kernel — except where the fp32
//     reference itself has a near-tie: at the first differing token, kite's fp32 CPU model
//     (equal to transformers within 1e-4, tests/e2e) is teacher-forced to that point and the
//     two candidates' logits must be within 2 % of the row's largest magnitude (4 % for the
//     MLA fixtures, whose BF16 error is twice as large; measured: continuations diverging
//     after 9 and 19 equal tokens at 2.2 % and 1.8 % margins, decode-step logits 3-5e-2 off);
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
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include <unistd.h>

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

// Every prompt's logits at every position against transformers', either from one prefill of
// the whole prompt or with the prompt fed one token per step (the decode path: paged decode
// attention, the decode-size MoE).
void expect_prompt_logits_match(const Case& c, bool one_token_per_step) {
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
    std::vector<float> got;
    if (one_token_per_step) {
      for (size_t pos = 0; pos < ids.size(); ++pos) {
        SequenceChunk step{std::span<const int32_t>(ids.data() + pos, 1),
                           static_cast<int32_t>(pos), table, LogitsMode::kLast};
        Tensor logits = runner.execute({&step, 1});
        got.insert(got.end(), logits.data<float>(), logits.data<float>() + vocab);
      }
    } else {
      SequenceChunk chunk{ids, 0, table, LogitsMode::kAll};
      Tensor logits = runner.execute({&chunk, 1});
      got.assign(logits.data<float>(), logits.data<float>() + logits.numel());
    }
    auto want = expected->get_f32("logits." + std::to_string(p),
                                  {static_cast<int64_t>(ids.size()), vocab});
    ASSERT_TRUE(want.ok()) << want.status().message();
    const double err =
        rel_error(got.data(), want->data<float>(), static_cast<int64_t>(got.size()));
    int64_t good_rows = 0;
    for (size_t r = 0; r < ids.size(); ++r)
      good_rows += rel_error(got.data() + r * vocab, want->data<float>() + r * vocab, vocab) < 3e-2;
    std::printf("  %s prompt %zu (%zu tokens%s): relative error vs transformers fp32 %.2e, "
                "%lld/%zu rows within 3e-2\n",
                c.name.c_str(), p, ids.size(), one_token_per_step ? ", one per step" : "", err,
                static_cast<long long>(good_rows), ids.size());
    if (!c.random_router || ids.size() <= 7) {
      EXPECT_LT(err, c.tolerance) << c.name << " prompt " << p;
    }
  }
}

TEST_P(CudaModel, LogitsWithinBf16OfTransformers) {
  expect_prompt_logits_match(GetParam(), false);
}

TEST_P(CudaModel, DecodeStepsWithinBf16OfTransformers) {
  expect_prompt_logits_match(GetParam(), true);
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
      // The MLA fixtures' BF16 error is twice the dense models' (their tolerance): so is a tie.
      const float tie = 0.02f * static_cast<float>(c.tolerance / 3e-2);
      EXPECT_LE(gap, tie * scale) << c.name << ": token " << i << " differs without a near-tie";
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

// CUDA graphs of decode steps (kernels/cuda/backend/step_graphs.h): a shape's first step runs
// eagerly, the second is captured and launched, later ones replay. All three must give the
// same logits bit for bit, a replay with new tokens must equal the same step run eagerly with
// graphs off (same kernels: decode steps are bucketed either way), and several replayed steps
// in a row must keep decoding what eager steps decode. Dense GQA and MLA + MoE (the decode
// expert GEMV) models, three sequences of different lengths.
std::vector<float> run_step(ModelRunner& runner, const std::vector<std::vector<int32_t>>& tables,
                            const std::vector<int32_t>& lens, const std::vector<int32_t>& tokens) {
  std::vector<SequenceChunk> chunks;
  for (size_t i = 0; i < tables.size(); ++i)
    chunks.push_back({std::span<const int32_t>(&tokens[i], 1), lens[i], tables[i],
                      LogitsMode::kLast});
  Tensor l = runner.execute(chunks);
  return {l.data<float>(), l.data<float>() + l.numel()};
}

TEST(CudaStepGraphs, ReplayedDecodeStepsEqualEagerOnes) {
  for (const std::string m : {"llama3", "deepseek_v3_all_experts"}) {
    SCOPED_TRACE(m);
    auto model = load(source_dir() + "/tests/fixtures/models/" + m, Device::kCuda);
    Backend& be = model->backend();
    const int64_t bs = 16, vocab = model->config().vocab_size;
    KvCache cache(model->kv_cache_spec(), 40, bs, be);
    ModelRunner runner(*model, cache);
    const std::vector<int32_t> prompt_lens = {5, 17, 40};
    std::vector<std::vector<int32_t>> prompts, tables;
    int32_t next_block = 39;
    for (int32_t n : prompt_lens) {
      std::vector<int32_t> ids(n), table(n / bs + 4);
      for (int32_t i = 0; i < n; ++i) ids[i] = (i * 37 + n) % static_cast<int32_t>(vocab);
      for (auto& b : table) b = next_block--;  // blocks from the pool's end, descending
      prompts.push_back(ids);
      tables.push_back(table);
    }
    be.set_step_graphs(0);
    std::vector<SequenceChunk> prefill;
    for (size_t i = 0; i < prompts.size(); ++i) prefill.push_back({prompts[i], 0, tables[i], LogitsMode::kLast});
    runner.execute(prefill);

    std::vector<int32_t> lens = prompt_lens, tokens = {11, 22, 33};
    be.set_step_graphs(8);
    const auto eager = run_step(runner, tables, lens, tokens);     // first sight: eager
    const auto captured = run_step(runner, tables, lens, tokens);  // captured, then launched
    const auto replayed = run_step(runner, tables, lens, tokens);  // replayed
    ASSERT_EQ(eager.size(), static_cast<size_t>(3 * vocab));
    for (float v : eager) ASSERT_TRUE(std::isfinite(v));
    EXPECT_TRUE(eager == captured) << "captured step differs from the eager one";
    EXPECT_TRUE(eager == replayed) << "replayed step differs from the eager one";

    // New tokens at the same positions (the same KV slots are rewritten): a replay must read
    // them, and equal the step run with graphs off.
    tokens = {44, 55, 66};
    const auto replay_new = run_step(runner, tables, lens, tokens);
    be.set_step_graphs(0);
    const auto eager_new = run_step(runner, tables, lens, tokens);
    EXPECT_TRUE(replay_new == eager_new) << "replay with new tokens differs from eager";
    EXPECT_FALSE(replay_new == eager) << "new tokens did not change the logits";

    // Greedy decoding for 6 steps, graphs on vs off, from the same state.
    auto decode = [&](bool graphs) {
      be.set_step_graphs(graphs ? 8 : 0);
      std::vector<int32_t> l = lens, tok = tokens, out;
      for (int step = 0; step < 6; ++step) {
        const auto logits = run_step(runner, tables, l, tok);
        for (size_t i = 0; i < tok.size(); ++i) {
          tok[i] = argmax(logits.data() + i * vocab, vocab);
          out.push_back(tok[i]);
          ++l[i];
        }
      }
      return out;
    };
    const auto with_graphs = decode(true);
    const auto without = decode(false);
    EXPECT_EQ(with_graphs, without);
  }
}

// A step's activation peak does not grow with depth: each decoder layer's scratch is given back
// once its output is in the residual stream (decoder_stack.cpp), so one prefill of the same
// tokens through 2 and through 6 layers of one shape (dummy weights) peaks at the same bytes.
// Without the per-layer scope every layer's activations were held to the step's end, so the
// peak grew with the layer count.
int64_t prefill_scratch_peak(const std::string& fixture, int layers, int tokens) {
  std::ifstream f(source_dir() + "/tests/fixtures/models/" + fixture + "/config.json");
  nlohmann::json config = nlohmann::json::parse(f);
  config["num_hidden_layers"] = layers;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("kite_depth_" + fixture + "_" + std::to_string(layers) + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump();
  cuda::register_cuda_backend();
  LoadOptions o;
  o.device = Device::kCuda;
  o.load_format = LoadFormat::kDummy;
  auto model = load_model(dir.string(), o);
  std::filesystem::remove_all(dir);
  if (!model.ok()) throw std::runtime_error(model.status().message());
  const int64_t vocab = (*model)->config().vocab_size;
  std::vector<int32_t> ids(tokens);
  for (int i = 0; i < tokens; ++i) ids[i] = static_cast<int32_t>((i * 31 + 5) % vocab);
  for (float v : last_logits(**model, ids))
    if (!std::isfinite(v)) throw std::runtime_error("non-finite logits");
  return (*model)->backend().scratch_peak_bytes();
}

TEST(CudaModelScratch, ActivationPeakDoesNotGrowWithDepth) {
  for (const std::string fixture : {"llama3", "deepseek_v2"}) {  // dense; MLA with MoE layers
    SCOPED_TRACE(fixture);
    const int64_t two = prefill_scratch_peak(fixture, 2, 500);
    const int64_t six = prefill_scratch_peak(fixture, 6, 500);
    std::printf("  %s, 500-token prefill: scratch peak %lld bytes at 2 layers, %lld at 6\n",
                fixture.c_str(), static_cast<long long>(two), static_cast<long long>(six));
    EXPECT_GT(two, 0);
    EXPECT_EQ(six, two);
  }
}

}  // namespace
}  // namespace kite
