#include "quant/eval.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "quant/calibration.h"
#include "quant/text_scoring.h"

namespace kite {
namespace {

// log_softmax of one row, in double.
void log_softmax(const float* logits, int64_t n, std::vector<double>& out) {
  double mx = logits[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(logits[i] - mx);
  const double lse = mx + std::log(sum);
  out.resize(n);
  for (int64_t i = 0; i < n; ++i) out[i] = logits[i] - lse;
}

int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

struct Totals {
  double nll = 0, nll_ref = 0, kl = 0;
  int64_t agree = 0, count = 0;
};

void accumulate(const Tensor& ref, const Tensor& q, std::span<const int32_t> targets, Totals& t) {
  const int64_t vocab = ref.size(1);
  std::vector<double> lr, lq;
  for (size_t p = 0; p < targets.size(); ++p) {
    const float* r = ref.data<float>() + p * vocab;
    const float* x = q.data<float>() + p * vocab;
    log_softmax(r, vocab, lr);
    log_softmax(x, vocab, lq);
    t.nll_ref -= lr[targets[p]];
    t.nll -= lq[targets[p]];
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) kl += std::exp(lr[i]) * (lr[i] - lq[i]);
    t.kl += kl;
    t.agree += argmax(r, vocab) == argmax(x, vocab);
    ++t.count;
  }
}

}  // namespace

Result<EvalResult> evaluate(const EvalOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  KITE_RETURN_IF_ERROR(check_load_options(o.model_dir, o.load));
  KITE_ASSIGN_OR_RETURN(std::string text, read_text_file(o.text_path));
  KITE_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_dir(o.model_dir));
  const std::vector<int32_t> ids = tokenize_documents(tokenizer, text);
  int64_t usable = static_cast<int64_t>(ids.size()) - 1;
  if (o.max_tokens > 0) usable = std::min(usable, o.max_tokens);
  if (usable < 2) return invalid_argument("text '" + o.text_path + "' has too few tokens to score");

  LoadOptions reference_options;
  reference_options.load_format = o.load.load_format;
  reference_options.dummy_seed = o.load.dummy_seed;
  KITE_ASSIGN_OR_RETURN(std::unique_ptr<Model> reference,
                        load_model(o.model_dir, reference_options));
  KITE_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, load_quantized_model(o.model_dir, o.load));
  const int64_t max_len = model->config().max_position_embeddings;
  int64_t window = std::min(o.window, usable);
  if (max_len > 0) window = std::min(window, max_len);
  if (window < 1) return invalid_argument("--window must be positive");
  const DType kv = o.load.quant.kv_cache_dtype == KvCacheDtype::kFp8 ? DType::kF8E4M3 : DType::kF32;
  KvScales kv_scales;  // empty: 1.0 per layer
  if (kv == DType::kF8E4M3 && !o.load.quant.calibration_text.empty()) {
    KITE_ASSIGN_OR_RETURN(kv_scales, calibrate_kv_scales(o.model_dir, o.load));
  }

  EvalResult result;
  result.windows = usable / window;
  Totals t;
  for (int64_t w = 0; w < result.windows; ++w) {
    const std::span<const int32_t> input(ids.data() + w * window, window);
    const std::span<const int32_t> targets(ids.data() + w * window + 1, window);
    Tensor ref_logits = run_sequence(*reference, input, DType::kF32, o.chunk, LogitsMode::kAll);
    Tensor q_logits =
        run_sequence(*model, input, kv, o.chunk, LogitsMode::kAll, &kv_scales.k, &kv_scales.v);
    accumulate(ref_logits, q_logits, targets, t);
    if ((w + 1) % 10 == 0) spdlog::info("eval: {} / {} windows", w + 1, result.windows);
  }
  result.tokens = t.count;
  result.perplexity = std::exp(t.nll / t.count);
  result.reference_perplexity = std::exp(t.nll_ref / t.count);
  result.kl_divergence = t.kl / t.count;
  result.top1_agreement = static_cast<double>(t.agree) / t.count;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace kite
