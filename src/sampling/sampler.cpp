#include "sampling/sampler.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace kite {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Vocab-sized buffers reused by every Sampler on this thread (see the class comment).
struct Workspace {
  std::vector<float> logits;  // penalised copy of the caller's row
  PenaltyScratch penalty;
  std::vector<Candidate> candidates;
  std::vector<float> weights;
};

Workspace& thread_workspace() {
  thread_local Workspace ws;
  return ws;
}

struct LogitScan {
  float max_logit;
  int32_t argmax;  // lowest id among equal maxima
};

// One pass: the maximum, its (lowest) id, and a check that the row can be sampled at all.
Result<LogitScan> scan_logits(std::span<const float> logits) {
  float best = kNegInf;
  int32_t best_id = 0;
  bool bad = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    bad |= std::isnan(v) || v == std::numeric_limits<float>::infinity();
    if (v > best) {
      best = v;
      best_id = static_cast<int32_t>(i);
    }
  }
  if (bad) {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!std::isfinite(logits[i]) && logits[i] != kNegInf) {
        return internal_error(fmt::format(
            "logits contain {} at token id {} (vocab {}); the model produced non-finite values",
            logits[i], i, logits.size()));
      }
    }
  }
  if (best == kNegInf) {
    return internal_error(
        fmt::format("all {} logits are -inf; no token can be sampled", logits.size()));
  }
  return LogitScan{best, best_id};
}

// log(sum(exp(logits))), accumulated in double so a 150k vocabulary loses no precision.
double log_sum_exp(std::span<const float> logits, float max_logit) {
  double sum = 0.0;
  for (float v : logits) sum += std::exp(v - max_logit);
  return static_cast<double>(max_logit) + std::log(sum);
}

// Inverse-CDF draw over candidate weights exp(logit - max). `u` is in [0, 1).
int32_t draw(const std::vector<Candidate>& cands, double u) {
  float m = kNegInf;
  for (const Candidate& c : cands) m = std::max(m, c.logit);
  double total = 0.0;
  for (const Candidate& c : cands) total += std::exp(c.logit - m);
  const double target = u * total;
  double cum = 0.0;
  int32_t last_positive = cands.front().token_id;
  for (const Candidate& c : cands) {
    const double w = std::exp(c.logit - m);
    if (w <= 0.0) continue;
    cum += w;
    last_positive = c.token_id;
    if (target < cum) return c.token_id;
  }
  return last_positive;  // rounding left target >= cum: the last token with weight
}

}  // namespace

Result<Sampler> Sampler::create(SamplingParams params) {
  KITE_RETURN_IF_ERROR(params.validate());
  return Sampler(std::move(params));
}

Sampler::Sampler(SamplingParams params) : params_(std::move(params)) {
  if (params_.seed.has_value()) {
    rng_.seed(*params_.seed);
  } else {
    std::random_device rd;
    rng_.seed((static_cast<uint64_t>(rd()) << 32) ^ rd());
  }
}

double Sampler::next_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

Result<SampleResult> Sampler::sample(std::span<const float> logits, const TokenHistory& history) {
  if (logits.empty()) return internal_error("sample() got an empty logits row (vocab 0)");
  Workspace& ws = thread_workspace();
  std::span<const float> row = logits;
  if (has_penalties(params_)) {
    ws.logits.assign(logits.begin(), logits.end());
    apply_penalties(ws.logits, history, params_, ws.penalty);
    row = ws.logits;
  }
  KITE_ASSIGN_OR_RETURN(LogitScan scan, scan_logits(row));

  SampleResult result;
  result.token_id = params_.is_greedy() ? scan.argmax : sample_random(row, scan.max_logit);
  if (params_.logprobs) {
    const double lse = log_sum_exp(row, scan.max_logit);
    result.logprob = static_cast<float>(row[result.token_id] - lse);
    if (params_.top_logprobs > 0) {
      select_top_k(row, params_.top_logprobs, ws.candidates);
      result.top_logprobs.reserve(ws.candidates.size());
      for (const Candidate& c : ws.candidates) {
        result.top_logprobs.push_back({c.token_id, static_cast<float>(c.logit - lse)});
      }
    }
  }
  return result;
}

int32_t Sampler::sample_random(std::span<const float> row, float max_logit) {
  Workspace& ws = thread_workspace();
  // Divide rather than multiply by 1/T: for a denormal T, 1/T is inf and 0 * inf is NaN.
  const float t = params_.temperature;
  const size_t vocab = row.size();
  const bool use_top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab;
  const bool use_top_p = params_.top_p < 1.0f;
  const bool use_min_p = params_.min_p > 0.0f;
  const double u = next_uniform();

  if (!use_top_k && !use_top_p && !use_min_p) {
    // Plain temperature sampling: one pass of weights over the dense row, no candidates.
    ws.weights.resize(vocab);
    double total = 0.0;
    for (size_t i = 0; i < vocab; ++i) {
      ws.weights[i] = std::exp((row[i] - max_logit) / t);
      total += ws.weights[i];
    }
    const double target = u * total;
    double cum = 0.0;
    size_t last_positive = 0;
    for (size_t i = 0; i < vocab; ++i) {
      if (ws.weights[i] <= 0.0f) continue;
      cum += ws.weights[i];
      last_positive = i;
      if (target < cum) return static_cast<int32_t>(i);
    }
    return static_cast<int32_t>(last_positive);
  }

  std::vector<Candidate>& cands = ws.candidates;
  bool sorted = false;
  if (use_top_k) {
    // Scaling by 1/T (T > 0) preserves the order, so select first and scale k values.
    select_top_k(row, params_.top_k, cands);
    sorted = true;
  } else {
    cands.clear();
    for (size_t i = 0; i < vocab; ++i) {
      if (row[i] != kNegInf) cands.push_back({static_cast<int32_t>(i), row[i]});
    }
  }
  for (Candidate& c : cands) c.logit = (c.logit - max_logit) / t;
  apply_top_p(cands, sorted, params_.top_p);
  apply_min_p(cands, params_.min_p);
  return draw(cands, u);
}

}  // namespace kite
