#include "sampling/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/vec_math.h"

namespace kite {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Vocab-sized buffers reused by every Sampler on this thread (see the class comment).
struct Workspace {
  std::vector<float> logits;  // penalised copy of the caller's row
  PenaltyScratch penalty;
  std::vector<Candidate> candidates;
  std::vector<float> candidate_logits;
  std::vector<float> weights;
  std::vector<double> block_sums;
};

Workspace& thread_workspace() {
  thread_local Workspace ws;
  return ws;
}

struct LogitScan {
  float max_logit;
  int32_t argmax;  // lowest id among equal maxima
};

// The maximum, its (lowest) id, and a check that the row can be sampled at all.
Result<LogitScan> scan_logits(std::span<const float> logits) {
  const vec::RowMax rm = vec::row_max(logits);
  if (rm.has_nan_or_pos_inf) {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!std::isfinite(logits[i]) && logits[i] != kNegInf) {
        return internal_error(
            fmt::format("logits contain {} at token id {} (vocab {}, after penalties); the model "
                        "produced non-finite values",
                        logits[i], i, logits.size()));
      }
    }
  }
  if (rm.max == kNegInf) {
    return internal_error(
        fmt::format("all {} logits are -inf; no token can be sampled", logits.size()));
  }
  return LogitScan{rm.max, static_cast<int32_t>(vec::first_index_of(logits, rm.max))};
}

// Inverse-CDF draw over candidate weights exp(logit - max). `u` is in [0, 1).
int32_t draw(const std::vector<Candidate>& cands, double u, Workspace& ws) {
  ws.candidate_logits.resize(cands.size());
  float m = kNegInf;
  for (size_t i = 0; i < cands.size(); ++i) {
    ws.candidate_logits[i] = cands[i].logit;
    m = std::max(m, cands[i].logit);
  }
  ws.weights.resize(cands.size());
  const double total = vec::exp_weights(ws.candidate_logits, m, 1.0f, ws.weights, ws.block_sums);
  return cands[vec::draw_index(ws.weights, ws.block_sums, u * total)].token_id;
}

// Inverse-CDF draw over candidates whose weights are already in the dense `weights` row.
int32_t draw_weighted(const std::vector<Candidate>& cands, std::span<const float> weights,
                      double u) {
  double total = 0.0;
  for (const Candidate& c : cands) total += weights[c.token_id];
  const double target = u * total;
  double cum = 0.0;
  for (const Candidate& c : cands) {
    cum += weights[c.token_id];
    if (target < cum) return c.token_id;
  }
  return cands.back().token_id;  // rounding; the nucleus only holds positive weights
}

// Candidates that can survive min_p at this temperature, from a dense row in one
// vectorised scan. The bound is loosened a little so float rounding never drops a token;
// apply_min_p then applies the exact rule to the scaled logits.
void min_p_candidates(std::span<const float> row, float max_logit, float inv_t, float min_p,
                      std::vector<Candidate>& out) {
  const float loose =
      max_logit + 1.001f * std::log(min_p) / inv_t - 1e-6f * std::max(1.0f, std::fabs(max_logit));
  out.clear();
  for (size_t i = vec::next_greater(row, 0, loose); i < row.size();
       i = vec::next_greater(row, i + 1, loose)) {
    out.push_back({static_cast<int32_t>(i), (row[i] - max_logit) * inv_t});
  }
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
    const double lse = scan.max_logit + std::log(vec::sum_exp(row, scan.max_logit, 1.0f));
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
  // Multiply by 1/T, clamped: for a denormal T, 1/T is inf and 0 * inf would be NaN.
  const float inv_t = std::min(1.0f / params_.temperature, std::numeric_limits<float>::max());
  const size_t vocab = row.size();
  const bool use_top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab;
  const bool use_top_p = params_.top_p < 1.0f;
  const bool use_min_p = params_.min_p > 0.0f;
  const double u = next_uniform();
  std::vector<Candidate>& cands = ws.candidates;

  if (use_top_k) {
    // Scaling by 1/T preserves the order, so select first and scale only k values.
    select_top_k(row, params_.top_k, cands);
    for (Candidate& c : cands) c.logit = (c.logit - max_logit) * inv_t;
    apply_top_p(cands, /*sorted=*/true, params_.top_p);
  } else if (use_top_p) {
    ws.weights.resize(vocab);
    const double total = vec::exp_weights(row, max_logit, inv_t, ws.weights, ws.block_sums);
    select_top_p(row, ws.weights, total, max_logit, inv_t, params_.top_p, cands);
    apply_min_p(cands, params_.min_p);
    return draw_weighted(cands, ws.weights, u);
  } else if (use_min_p) {
    min_p_candidates(row, max_logit, inv_t, params_.min_p, cands);
  } else {
    // Plain temperature sampling: weights over the dense row, no candidate list.
    ws.weights.resize(vocab);
    const double total = vec::exp_weights(row, max_logit, inv_t, ws.weights, ws.block_sums);
    return static_cast<int32_t>(vec::draw_index(ws.weights, ws.block_sums, u * total));
  }
  apply_min_p(cands, params_.min_p);
  return draw(cands, u, ws);
}

}  // namespace kite
