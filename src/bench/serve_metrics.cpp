#include "bench/serve_metrics.h"

#include <algorithm>

namespace kite::bench {

bool meets_slo(const RequestResult& r, const SloConfig& slo) {
  if (!r.success) return false;
  if (slo.ttft_ms && r.ttft_s * 1e3 > *slo.ttft_ms) return false;
  if (slo.tpot_ms && r.tpot_s() * 1e3 > *slo.tpot_ms) return false;
  if (slo.e2e_ms && r.e2e_s * 1e3 > *slo.e2e_ms) return false;
  return true;
}

ServeMetrics compute_serve_metrics(const std::vector<RequestResult>& results, double duration_s,
                                   const SloConfig& slo) {
  ServeMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestResult& r : results) {
    if (!r.success) {
      ++m.failed;
      if (m.first_errors.size() < 5 &&
          std::find(m.first_errors.begin(), m.first_errors.end(), r.error) == m.first_errors.end())
        m.first_errors.push_back(r.error);
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.prompt_tokens;
    m.total_output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s * 1e3);
    e2e.push_back(r.e2e_s * 1e3);
    if (r.output_tokens >= 2) tpot.push_back(r.tpot_s() * 1e3);
    for (double gap : r.itl_s) itl.push_back(gap * 1e3);
    if (slo.any() && meets_slo(r, slo)) ++m.good_requests;
  }
  if (duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
    if (slo.any()) m.goodput = static_cast<double>(m.good_requests) / duration_s;
  }
  m.ttft_ms = summarize(ttft);
  m.tpot_ms = summarize(tpot);
  m.itl_ms = summarize(itl);
  m.e2e_ms = summarize(e2e);
  return m;
}

nlohmann::json ServeMetrics::to_json() const {
  nlohmann::json j = {{"completed", completed},
                      {"failed", failed},
                      {"duration_s", duration_s},
                      {"total_input_tokens", total_input_tokens},
                      {"total_output_tokens", total_output_tokens},
                      {"request_throughput", request_throughput},
                      {"output_throughput", output_throughput},
                      {"total_token_throughput", total_token_throughput},
                      {"good_requests", good_requests},
                      {"goodput", goodput ? nlohmann::json(*goodput) : nlohmann::json()},
                      {"ttft_ms", ttft_ms.to_json()},
                      {"tpot_ms", tpot_ms.to_json()},
                      {"itl_ms", itl_ms.to_json()},
                      {"e2e_ms", e2e_ms.to_json()},
                      {"errors", first_errors}};
  return j;
}

}  // namespace kite::bench
