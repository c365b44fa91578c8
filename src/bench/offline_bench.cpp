#include "bench/offline_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "bench/dataset.h"
#include "bench/weight_bytes.h"

namespace kite::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

SamplingParams fixed_length(int32_t output_len) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = output_len;
  p.ignore_eos = true;
  return p;
}

// Token arrival times of a batch of requests, recorded on the engine thread.
struct BatchTimes {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<Clock::time_point>> token_times;  // per request, per token
  int32_t num_finished = 0;
  std::string error;
};

// Runs one batch and returns per-request token times; `start` is when it was queued.
Status run_batch(Engine& engine, const LatencyConfig& c, uint64_t iter_seed, BatchTimes& times,
                 Clock::time_point& start) {
  const int32_t vocab = static_cast<int32_t>(engine.model_config().vocab_size);
  times.token_times.assign(static_cast<size_t>(c.batch_size), {});
  std::vector<EngineRequest> reqs;
  for (int32_t b = 0; b < c.batch_size; ++b)
    reqs.push_back(EngineRequest{fmt::format("bench-{}-{}", iter_seed, b),
                                 random_token_ids(c.input_len, vocab, iter_seed * 1000 + b),
                                 fixed_length(c.output_len), 0});
  start = Clock::now();
  int32_t num_added = 0;
  Status added = ok_status();
  for (int32_t b = 0; b < c.batch_size && added.ok(); ++b) {
    added = engine.add_request(std::move(reqs[b]), [&times, b](const RequestOutput& o) {
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(times.mu);
      for (size_t i = 0; i < o.new_token_ids.size(); ++i) times.token_times[b].push_back(now);
      if (o.finish_reason == "error" && times.error.empty()) times.error = o.error_message;
      if (o.finished()) {
        ++times.num_finished;
        times.cv.notify_all();
      }
    });
    if (added.ok()) ++num_added;
  }
  if (!added.ok())  // the callbacks of the requests already queued reference `times`
    for (int32_t b = 0; b < num_added; ++b) engine.abort(fmt::format("bench-{}-{}", iter_seed, b));
  std::unique_lock<std::mutex> lock(times.mu);
  times.cv.wait(lock, [&] { return times.num_finished == num_added; });
  KITE_RETURN_IF_ERROR(added);
  if (!times.error.empty()) return internal_error("benchmark request failed: " + times.error);
  return ok_status();
}

}  // namespace

Result<LatencyReport> run_latency_benchmark(Engine& engine, const LatencyConfig& c) {
  if (c.input_len < 1 || c.output_len < 2 || c.batch_size < 1 || c.iters < 1 || c.warmup_iters < 0)
    return invalid_argument(
        "bench latency needs --input-len >= 1, --output-len >= 2, --batch-size >= 1, --iters >= 1");
  std::vector<double> prefill, decode, e2e;
  int64_t left_out = 0;
  for (int32_t it = 0; it < c.warmup_iters + c.iters; ++it) {
    BatchTimes times;
    Clock::time_point start;
    KITE_RETURN_IF_ERROR(
        run_batch(engine, c, c.seed * 7919 + static_cast<uint64_t>(it) + 1, times, start));
    if (it < c.warmup_iters) continue;
    Clock::time_point first_all = start, end = start;
    for (const auto& t : times.token_times) {
      if (t.empty()) return internal_error("a benchmark request produced no tokens");
      first_all = std::max(first_all, t.front());
      end = std::max(end, t.back());
    }
    prefill.push_back(ms_between(start, first_all));
    e2e.push_back(ms_between(start, end));
    // Request 0's token from the step that gave the last request its first token: its last
    // token that arrived no later than a quarter of its shortest gap after first_all (the
    // outputs of one step reach their callbacks microseconds apart; steps take far longer).
    // The gaps after that token are pure decode steps.
    const auto& t0 = times.token_times[0];
    std::vector<double> gaps;  // gaps[i - 1]: from token i - 1 to token i
    for (size_t i = 1; i < t0.size(); ++i) gaps.push_back(ms_between(t0[i - 1], t0[i]));
    const double min_gap = *std::min_element(gaps.begin(), gaps.end());
    size_t step_of_last_first = 0;
    for (size_t i = 0; i < t0.size(); ++i)
      if (ms_between(first_all, t0[i]) <= 0.25 * min_gap) step_of_last_first = i;
    left_out += static_cast<int64_t>(step_of_last_first);
    decode.insert(decode.end(), gaps.begin() + static_cast<std::ptrdiff_t>(step_of_last_first),
                  gaps.end());
  }
  if (decode.empty())
    return invalid_argument(
        "bench latency: no decode step came after the last prompt's prefill; raise --output-len "
        "or --max-num-batched-tokens (to at least --batch-size x --input-len)");
  LatencyReport r;
  r.config = c;
  r.decode_gaps_left_out = left_out;
  r.prefill_ms = summarize(prefill);
  r.decode_ms_per_step = summarize(decode);
  const QuantOptions& quant = engine.config().quant;
  r.weight_dtype = std::string(dtype_name(engine.weight_dtype()));
  r.weight_dtype = weight_dtype_label(quant, r.weight_dtype);
  r.weight_bytes_per_step = decode_weight_bytes_per_step(
      engine.model_config(), c.batch_size,
      weight_bytes_for(quant.method, quant.lm_head_quant(), dtype_size(engine.weight_dtype())));
  if (r.decode_ms_per_step.mean > 0)
    r.decode_gbps_mean = r.weight_bytes_per_step / (r.decode_ms_per_step.mean * 1e6);
  if (r.decode_ms_per_step.p50 > 0)
    r.decode_gbps_p50 = r.weight_bytes_per_step / (r.decode_ms_per_step.p50 * 1e6);
  r.e2e_ms_mean = summarize(e2e).mean;
  return r;
}

nlohmann::json LatencyReport::to_json() const {
  return {{"input_len", config.input_len},
          {"output_len", config.output_len},
          {"batch_size", config.batch_size},
          {"iters", config.iters},
          {"prefill_ms", prefill_ms.to_json()},
          {"decode_ms_per_step", decode_ms_per_step.to_json()},
          {"decode_ms_per_token", decode_ms_per_step.mean / config.batch_size},
          {"decode_gaps_left_out", decode_gaps_left_out},
          {"weight_bytes_per_step", weight_bytes_per_step},
          {"decode_weight_gbps_mean", decode_gbps_mean},
          {"weight_dtype", weight_dtype},
          {"decode_weight_gbps_p50", decode_gbps_p50},
          {"e2e_ms_mean", e2e_ms_mean}};
}

std::string LatencyReport::format() const {
  const std::string left_out =
      decode_gaps_left_out > 0
          ? fmt::format("decode steps with prompt tokens in them, left out: {}\n",
                        decode_gaps_left_out)
          : std::string();
  return left_out + fmt::format(
      "input_len {} output_len {} batch {} ({} iters)\n"
      "prefill (TTFT)       mean {:.2f} ms  p50 {:.2f} ms  p99 {:.2f} ms\n"
      "decode step          mean {:.3f} ms  p50 {:.3f} ms  p99 {:.3f} ms  ({:.1f} tok/s per "
      "sequence)\n"
      "weights read / step  {:.2f} MB ({})  ->  {:.2f} GB/s mean, {:.2f} GB/s p50\n"
      "end to end           mean {:.1f} ms\n",
      config.input_len, config.output_len, config.batch_size, config.iters, prefill_ms.mean,
      prefill_ms.p50, prefill_ms.p99, decode_ms_per_step.mean, decode_ms_per_step.p50,
      decode_ms_per_step.p99, decode_ms_per_step.mean > 0 ? 1e3 / decode_ms_per_step.mean : 0.0,
      weight_bytes_per_step / 1e6, weight_dtype, decode_gbps_mean, decode_gbps_p50, e2e_ms_mean);
}

Result<ThroughputReport> run_throughput_benchmark(LLM& llm, const ThroughputConfig& c) {
  if (c.input_len < 1 || c.output_len < 1 || c.num_prompts < 1)
    return invalid_argument(
        "bench throughput needs --input-len, --output-len and --num-prompts >= 1");
  const int32_t vocab = static_cast<int32_t>(llm.engine().model_config().vocab_size);
  std::vector<GenerateInput> inputs;
  for (int32_t i = 0; i < c.num_prompts; ++i)
    inputs.push_back(GenerateInput{random_token_ids(c.input_len, vocab, c.seed * 1000003 + i),
                                   fixed_length(c.output_len), 0});
  const auto start = Clock::now();
  KITE_ASSIGN_OR_RETURN(std::vector<GenerateResult> results, llm.generate(inputs));
  const double elapsed_s = ms_between(start, Clock::now()) / 1e3;
  ThroughputReport r;
  r.config = c;
  r.elapsed_s = elapsed_s;
  for (const auto& res : results) {
    if (res.finish_reason == "error")
      return internal_error("benchmark request failed: " + res.error_message);
    r.total_prompt_tokens += res.num_prompt_tokens;
    r.total_output_tokens += static_cast<int64_t>(res.token_ids.size());
  }
  r.requests_per_s = c.num_prompts / elapsed_s;
  r.output_tokens_per_s = static_cast<double>(r.total_output_tokens) / elapsed_s;
  r.total_tokens_per_s =
      static_cast<double>(r.total_prompt_tokens + r.total_output_tokens) / elapsed_s;
  return r;
}

nlohmann::json ThroughputReport::to_json() const {
  return {{"input_len", config.input_len},
          {"output_len", config.output_len},
          {"num_prompts", config.num_prompts},
          {"elapsed_s", elapsed_s},
          {"total_prompt_tokens", total_prompt_tokens},
          {"total_output_tokens", total_output_tokens},
          {"requests_per_s", requests_per_s},
          {"output_tokens_per_s", output_tokens_per_s},
          {"total_tokens_per_s", total_tokens_per_s}};
}

std::string ThroughputReport::format() const {
  return fmt::format(
      "{} prompts, input_len {} output_len {}: {:.2f} s\n"
      "Throughput: {:.2f} requests/s, {:.1f} output tokens/s, {:.1f} total tokens/s\n",
      config.num_prompts, config.input_len, config.output_len, elapsed_s, requests_per_s,
      output_tokens_per_s, total_tokens_per_s);
}

nlohmann::json describe_model(const Engine& engine) {
  const ModelConfig& m = engine.model_config();
  const ParamCounts p = count_params(m);
  return {{"dir", engine.config().model_dir},
          {"model_type", m.model_type_name},
          {"load_format", std::string(load_format_name(engine.config().load_format))},
          {"num_hidden_layers", m.num_hidden_layers},
          {"hidden_size", m.hidden_size},
          {"vocab_size", m.vocab_size},
          {"n_routed_experts", m.n_routed_experts},
          {"num_experts_per_tok", m.num_experts_per_tok},
          {"total_params", p.total},
          {"decode_params_per_token", decode_weight_bytes_per_step(m, 1) / 4}};
}

}  // namespace kite::bench
