// Quantization on the shipped model: on-load quantization stays close to fp32, smoothing
// folded into norms is an identity, `kite quantize` checkpoints load back to the same logits
// as on-load quantization, the FP8 KV cache stays close, --quantize-lm-head quantizes lm_head
// (tied or not) and round-trips through `kite quantize`, --lm-head-quantization gives lm_head a
// form of its own, and evaluate() of the unquantized
// model against itself gives KL 0 and full agreement.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "model/model.h"
#include "quant/calibration.h"
#include "quant/eval.h"
#include "quant/export.h"
#include "quant/smoothing_search.h"
#include "quant/text_scoring.h"

namespace kite {
namespace {

namespace fs = std::filesystem;
const std::string kModelDir = std::string(KITE_SOURCE_DIR) + "/models/kite-tiny";
const std::string kHeldout = kModelDir + "/heldout.txt";

std::vector<int32_t> prompt_tokens(int64_t n) {
  auto tok = Tokenizer::from_dir(kModelDir);
  auto text = read_text_file(kHeldout);
  std::vector<int32_t> ids = tokenize_documents(*tok, text->substr(0, 4000));
  ids.resize(n);
  return ids;
}

Tensor logits_of(const LoadOptions& options, const std::string& dir = kModelDir,
                 DType kv = DType::kF32) {
  auto model = load_quantized_model(dir, options);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return Tensor();
  return run_sequence(**model, prompt_tokens(96), kv, 40, LogitsMode::kAll);
}

struct Agreement {
  double kl = 0, top1 = 0, max_abs_diff = 0;
};

Agreement compare(const Tensor& ref, const Tensor& q) {
  Agreement a;
  const int64_t rows = ref.size(0), v = ref.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = ref.data<float>() + r * v;
    const float* y = q.data<float>() + r * v;
    double mx = -INFINITY, my = -INFINITY, sx = 0, sy = 0;
    int64_t ax = 0, ay = 0;
    for (int64_t i = 0; i < v; ++i) {
      if (x[i] > x[ax]) ax = i;
      if (y[i] > y[ay]) ay = i;
      mx = std::max(mx, (double)x[i]);
      my = std::max(my, (double)y[i]);
      a.max_abs_diff = std::max(a.max_abs_diff, std::fabs((double)x[i] - y[i]));
    }
    for (int64_t i = 0; i < v; ++i) sx += std::exp(x[i] - mx), sy += std::exp(y[i] - my);
    for (int64_t i = 0; i < v; ++i) {
      const double lx = x[i] - mx - std::log(sx), ly = y[i] - my - std::log(sy);
      a.kl += std::exp(lx) * (lx - ly);
    }
    a.top1 += ax == ay;
  }
  a.kl /= rows;
  a.top1 /= rows;
  return a;
}

LoadOptions with_method(QuantMethod m, bool lm_head = false) {
  LoadOptions o;
  o.quant.method = m;
  o.quant.quantize_lm_head = lm_head;
  return o;
}

TEST(QuantKiteTiny, OnLoadQuantizationStaysCloseToFp32) {
  const Tensor ref = logits_of({});
  struct Want {
    QuantMethod method;
    double max_kl;
  };
  for (Want w : {Want{QuantMethod::kFp8, 0.02}, Want{QuantMethod::kInt4, 0.2}}) {
    const Agreement a = compare(ref, logits_of(with_method(w.method)));
    SCOPED_TRACE(std::string(quant_method_name(w.method)));
    EXPECT_GT(a.max_abs_diff, 1e-3);  // the quantized path really ran
    EXPECT_LT(a.kl, w.max_kl);
    EXPECT_GT(a.top1, 0.8);
  }
}

TEST(QuantKiteTiny, Fp8KvCacheStaysClose) {
  const Tensor ref = logits_of({});
  const Agreement a = compare(ref, logits_of({}, kModelDir, DType::kF8E4M3));
  EXPECT_GT(a.max_abs_diff, 1e-4);
  EXPECT_LT(a.kl, 0.02);
  EXPECT_GT(a.top1, 0.85);
  // Calibrated per-layer scales (on the model's README, not the scored text).
  LoadOptions o;
  o.quant.calibration_text = kModelDir + "/README.md";
  auto scales = calibrate_kv_scales(kModelDir, o);
  ASSERT_TRUE(scales.ok()) << scales.status().message();
  ASSERT_EQ(scales->k.size(), 6u);
  for (size_t l = 0; l < 6; ++l) {
    EXPECT_GT(scales->k[l], 1e-4f);
    EXPECT_EQ(scales->k[l], scales->v[l]);  // MLA: one latent cache
  }
  auto model = load_model(kModelDir);
  ASSERT_TRUE(model.ok());
  const Tensor calibrated = run_sequence(**model, prompt_tokens(96), DType::kF8E4M3, 40,
                                         LogitsMode::kAll, &scales->k, &scales->v);
  const Agreement c = compare(ref, calibrated);
  EXPECT_GT(c.max_abs_diff, 1e-4);
  EXPECT_LT(c.kl, 0.02);
}

// Random smoothing factors for every norm-fed group (router included), as calibration would
// assign them; `explicit_too` adds explicit factors for o_proj / down_proj.
std::shared_ptr<QuantPlan> random_smoothing_plan(QuantMethod method, bool explicit_too) {
  LoadOptions o;
  auto plan = build_quant_plan(kModelDir, o);
  auto p = std::make_shared<QuantPlan>(**plan);
  p->method = method;
  auto store = WeightStore::open(kModelDir);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(0.5f, 2.0f);
  std::map<std::string, std::vector<float>> by_group;
  for (const std::string& name : store->names()) {
    if (!name.ends_with(".weight")) continue;
    const std::string key = name.substr(0, name.size() - 7);
    auto norm = QuantPlan::input_norm_of(key);
    if (!norm && !(explicit_too && QuantPlan::is_quantizable(key))) continue;
    const std::string group = norm ? *norm : key;
    const int64_t in = store->info(name)->shape.at(1);
    auto& s = by_group[group];
    if (s.empty())
      for (int64_t i = 0; i < in; ++i) s.push_back(dist(rng));
    p->smoothing[key] = Smoothing{s, norm.has_value()};
    if (norm) p->norm_divisors[*norm] = s;
  }
  return p;
}

TEST(QuantKiteTiny, FoldedSmoothingIsAnIdentity) {
  LoadOptions o;
  o.plan = random_smoothing_plan(QuantMethod::kNone, false);
  ASSERT_GT(o.plan->norm_divisors.size(), 10u);
  const Agreement a = compare(logits_of({}), logits_of(o));
  EXPECT_LT(a.max_abs_diff, 2e-3);
  EXPECT_EQ(a.top1, 1.0);
}

void expect_round_trip(const std::shared_ptr<const QuantPlan>& plan, const std::string& tag) {
  const fs::path out =
      fs::temp_directory_path() / ("kite_quant_rt_" + tag + std::to_string(::getpid()));
  ASSERT_TRUE(export_quantized_checkpoint(kModelDir, *plan, out.string()).ok());
  LoadOptions on_load;
  on_load.plan = plan;
  const Tensor want = logits_of(on_load);
  const Tensor got = logits_of({}, out.string());
  ASSERT_EQ(got.numel(), want.numel());
  EXPECT_LT(compare(want, got).max_abs_diff, 1e-4) << tag;
  fs::remove_all(out);
}

TEST(QuantKiteTiny, ExportedCheckpointsLoadBackToOnLoadLogits) {
  // fp8: compressed-tensors layout; int4 with folded + explicit smoothing: the AWQ layout,
  // modified norms and router, input_smooth_inv; int8 smoothed: I8 + explicit smoothing.
  auto fp8 = build_quant_plan(kModelDir, with_method(QuantMethod::kFp8));
  ASSERT_TRUE(fp8.ok());
  expect_round_trip(*fp8, "fp8");
  expect_round_trip(random_smoothing_plan(QuantMethod::kInt4, true), "int4_smoothed");
  expect_round_trip(random_smoothing_plan(QuantMethod::kInt8, true), "int8_smoothed");
}

TEST(QuantKiteTiny, QuantizedLmHeadStaysCloseAndTakesManyRows) {
  const Tensor ref = logits_of({});
  for (QuantMethod m : {QuantMethod::kFp8, QuantMethod::kInt4}) {
    SCOPED_TRACE(std::string(quant_method_name(m)));
    const Tensor body = logits_of(with_method(m));
    const Tensor all = logits_of(with_method(m, true));
    EXPECT_GT(compare(body, all).max_abs_diff, 1e-4);  // lm_head really was quantized
    const Agreement a = compare(ref, all);
    EXPECT_LT(a.kl, m == QuantMethod::kFp8 ? 0.02 : 0.25);
    EXPECT_GT(a.top1, 0.8);
  }
  // 160 logits rows in one step take the lm_head in 128-row calls: the same rows as 40-token
  // steps give. INT4 (weight-only): the activations stay fp32, so only summation order differs
  // (per-token FP8 activation codes would flip with it).
  auto model = load_quantized_model(kModelDir, with_method(QuantMethod::kInt4, true));
  ASSERT_TRUE(model.ok()) << model.status().message();
  const std::vector<int32_t> ids = prompt_tokens(160);
  const Tensor one_step = run_sequence(**model, ids, DType::kF32, 160, LogitsMode::kAll);
  const Tensor steps = run_sequence(**model, ids, DType::kF32, 40, LogitsMode::kAll);
  ASSERT_EQ(one_step.numel(), steps.numel());
  EXPECT_LT(compare(steps, one_step).max_abs_diff, 1e-3);
  // Without a method there is nothing to quantize lm_head with.
  LoadOptions none;
  none.quant.quantize_lm_head = true;
  EXPECT_FALSE(load_quantized_model(kModelDir, none).ok());
}

// --lm-head-quantization: lm_head in its own plain form whatever the linears take. An 8-bit
// lm_head under INT4 linears moves the logits far less than INT4's own lm_head does; without
// --quantization only lm_head is quantized; awq (no plain form) and a mixed export are refused.
TEST(QuantKiteTiny, LmHeadTakesItsOwnFormat) {
  const Tensor body = logits_of(with_method(QuantMethod::kInt4));
  const Tensor int4_head = logits_of(with_method(QuantMethod::kInt4, true));
  LoadOptions o = with_method(QuantMethod::kInt4);
  o.quant.lm_head_method = QuantMethod::kInt8;
  auto plan = build_quant_plan(kModelDir, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE((*plan)->quantize_lm_head());
  EXPECT_EQ((*plan)->lm_head_method, QuantMethod::kInt8);
  const Tensor int8_head = logits_of(o);
  const double moved = compare(body, int8_head).max_abs_diff;
  EXPECT_GT(moved, 1e-4);  // lm_head really was quantized
  EXPECT_LT(compare(body, int8_head).kl, 0.25 * compare(body, int4_head).kl);

  LoadOptions head_only;
  head_only.quant.lm_head_method = QuantMethod::kFp8;
  const Tensor ref = logits_of({});
  const Agreement a = compare(ref, logits_of(head_only));
  EXPECT_GT(a.max_abs_diff, 1e-4);
  EXPECT_LT(a.kl, 0.02);

  LoadOptions awq_head = with_method(QuantMethod::kInt4);
  awq_head.quant.lm_head_method = QuantMethod::kAwq;
  EXPECT_FALSE(build_quant_plan(kModelDir, awq_head).ok());

  const fs::path out = fs::temp_directory_path() / ("kite_mixed_" + std::to_string(::getpid()));
  const Status s = export_quantized_checkpoint(kModelDir, **plan, out.string());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("one format"), std::string::npos) << s.message();
  fs::remove_all(out);
}

TEST(QuantKiteTiny, QuantizedLmHeadRoundTripsThroughExport) {
  for (QuantMethod m : {QuantMethod::kFp8, QuantMethod::kInt4}) {
    auto plan = build_quant_plan(kModelDir, with_method(m, true));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    expect_round_trip(*plan, std::string("lm_head_") + std::string(quant_method_name(m)));
  }
}

TEST(QuantKiteTiny, TiedLmHeadIsQuantizedBesideTheEmbedding) {
  // The qwen2 fixture ties lm_head to the embedding: serving quantizes a copy, export refuses
  // (a checkpoint has no place for an lm_head apart from the embedding).
  const std::string tied = std::string(KITE_SOURCE_DIR) + "/tests/fixtures/models/qwen2";
  std::vector<int32_t> ids(24);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 3) % 500);
  auto body = load_quantized_model(tied, with_method(QuantMethod::kInt4));
  auto all = load_quantized_model(tied, with_method(QuantMethod::kInt4, true));
  ASSERT_TRUE(body.ok() && all.ok());
  const Tensor a = run_sequence(**body, ids, DType::kF32, 24, LogitsMode::kAll);
  const Tensor b = run_sequence(**all, ids, DType::kF32, 24, LogitsMode::kAll);
  const Agreement d = compare(a, b);
  EXPECT_GT(d.max_abs_diff, 1e-5);
  EXPECT_TRUE(std::isfinite(d.kl));
  auto plan = build_quant_plan(tied, with_method(QuantMethod::kInt4, true));
  ASSERT_TRUE(plan.ok());
  const fs::path out = fs::temp_directory_path() / ("kite_tied_" + std::to_string(::getpid()));
  const Status s = export_quantized_checkpoint(tied, **plan, out.string());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ties lm_head"), std::string::npos) << s.message();
  fs::remove_all(out);
}

TEST(QuantKiteTiny, EvaluateUnquantizedAgainstItself) {
  EvalOptions o;
  o.model_dir = kModelDir;
  o.text_path = kHeldout;
  o.max_tokens = 160;
  o.window = 80;
  o.chunk = 48;
  auto r = evaluate(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tokens, 160);
  EXPECT_EQ(r->windows, 2);
  EXPECT_NEAR(r->kl_divergence, 0.0, 1e-9);
  EXPECT_EQ(r->top1_agreement, 1.0);
  EXPECT_DOUBLE_EQ(r->perplexity, r->reference_perplexity);
  EXPECT_GT(r->perplexity, 3.0);  // a real model on real text: not degenerate
  EXPECT_LT(r->perplexity, 200.0);
}

}  // namespace
}  // namespace kite
