#include "bench/serve_bench.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <sstream>

namespace kite::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Shared state of one run; lives on the client's thread only.
struct RunState {
  HttpClient* client;
  const ServeRunConfig* config;
  const std::vector<BenchRequest>* requests;
  std::vector<std::string> bodies;
  std::vector<RequestResult> results;
  std::deque<size_t> ready;  // arrived, waiting for a concurrency slot
  int32_t in_flight = 0;
  Clock::time_point start;
  Clock::time_point last_end;

  void arrive(size_t i) {
    ready.push_back(i);
    pump();
  }

  void pump() {
    while (!ready.empty() &&
           (config->max_concurrency <= 0 || in_flight < config->max_concurrency)) {
      const size_t i = ready.front();
      ready.pop_front();
      send(i);
    }
  }

  void send(size_t i) {
    ++in_flight;
    struct Stream {
      StreamRecorder recorder;
      SseParser parser;
      Clock::time_point sent;
      double now_s() const { return seconds_between(sent, Clock::now()); }
    };
    auto stream = std::make_shared<Stream>(
        Stream{StreamRecorder(config->endpoint), SseParser(nullptr), Clock::now()});
    Stream* raw = stream.get();
    stream->parser =
        SseParser([raw](const SseEvent& e) { raw->recorder.on_event(e, raw->now_s()); });
    const double send_s = seconds_between(start, stream->sent);
    StreamHandlers h;
    h.on_body = [raw](std::string_view bytes) { raw->parser.feed(bytes); };
    h.on_done = [this, stream, i, send_s](const Status& st) {
      const double end_s = stream->now_s();
      stream->parser.finish();
      results[i] = stream->recorder.finish((*requests)[i], st, end_s);
      results[i].send_s = send_s;
      last_end = Clock::now();
      --in_flight;
      pump();
    };
    client->post(endpoint_path(config->endpoint), bodies[i], std::move(h));
  }
};

nlohmann::json request_json(const RequestResult& r) {
  nlohmann::json itl = nlohmann::json::array();
  for (double g : r.itl_s) itl.push_back(g * 1e3);
  return {{"success", r.success},
          {"error", r.error},
          {"send_s", r.send_s},
          {"ttft_ms", r.ttft_s * 1e3},
          {"tpot_ms", r.tpot_s() * 1e3},
          {"e2e_ms", r.e2e_s * 1e3},
          {"prompt_tokens", r.prompt_tokens},
          {"output_tokens", r.output_tokens},
          {"content_chunks", r.num_content_chunks},
          {"usage_reported", r.usage_reported},
          {"itl_ms", itl}};
}

nlohmann::json rate_json(double rate) {
  return std::isinf(rate) ? nlohmann::json("inf") : nlohmann::json(rate);
}

}  // namespace

Result<ServeRun> run_serve_benchmark(HttpClient& client, const ServeRunConfig& config,
                                     const std::vector<BenchRequest>& requests) {
  if (config.max_concurrency < 0) return invalid_argument("--max-concurrency must be >= 1");
  KITE_ASSIGN_OR_RETURN(
      std::vector<double> arrivals,
      arrival_offsets_s(ArrivalConfig{config.request_rate, config.burstiness, config.seed},
                        static_cast<int64_t>(requests.size())));
  RunState state;
  state.client = &client;
  state.config = &config;
  state.requests = &requests;
  state.results.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto body = make_request_body(requests[i], config.endpoint, config.model);
    if (!body.ok()) return body.status().with_context("prompt " + std::to_string(i));
    state.bodies.push_back(body->dump());
  }
  state.start = Clock::now();
  state.last_end = state.start;
  for (size_t i = 0; i < requests.size(); ++i) {
    const double delay = arrivals[i] - seconds_between(state.start, Clock::now());
    client.call_after(delay, [&state, i] { state.arrive(i); });
  }
  client.run();
  ServeRun run;
  run.config = config;
  run.results = std::move(state.results);
  run.metrics =
      compute_serve_metrics(run.results, seconds_between(state.start, state.last_end), config.slo);
  return run;
}

nlohmann::json ServeRun::to_json() const {
  nlohmann::json slo = {
      {"ttft_ms", config.slo.ttft_ms ? nlohmann::json(*config.slo.ttft_ms) : nlohmann::json()},
      {"tpot_ms", config.slo.tpot_ms ? nlohmann::json(*config.slo.tpot_ms) : nlohmann::json()},
      {"e2e_ms", config.slo.e2e_ms ? nlohmann::json(*config.slo.e2e_ms) : nlohmann::json()}};
  nlohmann::json j = metrics.to_json();
  j["request_rate"] = rate_json(config.request_rate);
  j["burstiness"] = config.burstiness;
  j["max_concurrency"] =
      config.max_concurrency > 0 ? nlohmann::json(config.max_concurrency) : nlohmann::json();
  j["slo"] = slo;
  j["num_prompts"] = results.size();
  nlohmann::json per = nlohmann::json::array();
  for (const auto& r : results) per.push_back(request_json(r));
  j["requests"] = std::move(per);
  return j;
}

Result<std::string> fetch_default_model(HttpClient& client) {
  std::string body;
  Status status = internal_error("no reply");
  client.get("/v1/models", StreamHandlers{[&](std::string_view b) { body.append(b); },
                                          [&](const Status& st) { status = st; }});
  client.run();
  if (!status.ok()) return status.with_context("GET /v1/models (pass --model to skip it)");
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
      j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string())
    return j["data"][0]["id"].get<std::string>();
  return invalid_argument("GET /v1/models returned no model id; pass --model NAME");
}

Result<std::vector<double>> parse_rate_list(const std::string& text) {
  std::vector<double> rates;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item == "inf" || item == "+inf" || item == "Inf") {
      rates.push_back(INFINITY);
      continue;
    }
    char* end = nullptr;
    const double r = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(r > 0) || std::isinf(r))
      return invalid_argument("--request-rate: '" + item + "' is not a rate > 0 (or inf)");
    rates.push_back(r);
  }
  if (rates.empty()) return invalid_argument("--request-rate is empty");
  return rates;
}

std::string format_serve_run(const ServeRun& run) {
  const ServeMetrics& m = run.metrics;
  std::string rate =
      std::isinf(run.config.request_rate) ? "inf" : fmt::format("{:g}", run.config.request_rate);
  std::string out =
      fmt::format("============ Serving Benchmark Result (rate {} req/s) ============\n", rate);
  auto line = [&](const std::string& k, const std::string& v) {
    out += fmt::format("{:<40}{:>12}\n", k, v);
  };
  line("Successful requests:", std::to_string(m.completed));
  line("Failed requests:", std::to_string(m.failed));
  line("Benchmark duration (s):", fmt::format("{:.2f}", m.duration_s));
  line("Total input tokens:", std::to_string(m.total_input_tokens));
  line("Total generated tokens:", std::to_string(m.total_output_tokens));
  line("Request throughput (req/s):", fmt::format("{:.2f}", m.request_throughput));
  if (m.goodput) line("Request goodput (req/s):", fmt::format("{:.2f}", *m.goodput));
  line("Output token throughput (tok/s):", fmt::format("{:.2f}", m.output_throughput));
  line("Total token throughput (tok/s):", fmt::format("{:.2f}", m.total_token_throughput));
  auto block = [&](const char* name, const Summary& s) {
    out += fmt::format("---------------{:-^30}---------------\n", std::string(" ") + name + " ");
    line(fmt::format("Mean {} (ms):", name), fmt::format("{:.2f}", s.mean));
    line(fmt::format("P50 {} (ms):", name), fmt::format("{:.2f}", s.p50));
    line(fmt::format("P90 {} (ms):", name), fmt::format("{:.2f}", s.p90));
    line(fmt::format("P99 {} (ms):", name), fmt::format("{:.2f}", s.p99));
  };
  block("TTFT", m.ttft_ms);
  block("TPOT", m.tpot_ms);
  block("ITL", m.itl_ms);
  block("E2E", m.e2e_ms);
  for (const auto& e : m.first_errors) out += "error: " + e + "\n";
  out += std::string(60, '=') + "\n";
  return out;
}

}  // namespace kite::bench
