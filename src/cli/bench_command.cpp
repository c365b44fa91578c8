// `kite bench serve | latency | throughput`: the load generator against an OpenAI-compatible
// server, and the in-process latency and offline-throughput benchmarks (src/bench/).
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench/offline_bench.h"
#include "bench/serve_bench.h"
#include "bench/sweep_plot.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/number_checks.h"

namespace kite::cli {
namespace {

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return not_found("cannot write '" + path + "'");
  out << text;
  if (!out) return internal_error("writing '" + path + "' failed");
  return ok_status();
}

// --result-json / --plot: a file that can be written, checked when the flags are parsed, before
// any work: a model load or a rate sweep takes minutes, and a mistyped folder used to lose the
// results only at the end.
const CLI::Validator kWritableFile(
    [](std::string& path) -> std::string {
      namespace fs = std::filesystem;
      std::error_code ec;
      if (fs::is_directory(path, ec)) return "'" + path + "' is a folder; give a file name";
      const fs::path parent =
          fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
      if (!fs::is_directory(parent, ec)) return "folder '" + parent.string() + "' does not exist";
      if (::access(parent.c_str(), W_OK) != 0 ||
          (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0))
        return "'" + path + "' cannot be written";
      return std::string();
    },
    "FILE");

std::string today_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

struct ServeFlags {
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  std::string dataset = "random";
  std::string endpoint = "completions";
  std::string prompt_format = "auto";
  std::string rates = "inf";
  bench::DatasetConfig data;
  double burstiness = 1.0;
  int32_t max_concurrency = 0;
  std::optional<double> slo_ttft_ms, slo_tpot_ms, slo_e2e_ms;
  double timeout_s = 600;
  std::string result_json, plot;
};

Status run_serve(ServeFlags& f) {
  KITE_ASSIGN_OR_RETURN(f.data.kind, bench::parse_dataset_kind(f.dataset));
  KITE_ASSIGN_OR_RETURN(bench::Endpoint endpoint, bench::parse_endpoint(f.endpoint));
  KITE_ASSIGN_OR_RETURN(std::vector<double> rates, bench::parse_rate_list(f.rates));
  if (f.prompt_format == "auto")
    f.data.format = endpoint == bench::Endpoint::kChat ? bench::PromptFormat::kText
                                                       : bench::PromptFormat::kTokenIds;
  else
    f.data.format =
        f.prompt_format == "text" ? bench::PromptFormat::kText : bench::PromptFormat::kTokenIds;
  KITE_ASSIGN_OR_RETURN(std::vector<bench::BenchRequest> requests, bench::build_dataset(f.data));
  KITE_ASSIGN_OR_RETURN(std::unique_ptr<bench::HttpClient> client,
                        bench::HttpClient::create(f.url));
  client->set_timeout(f.timeout_s);
  if (f.model.empty()) {
    KITE_ASSIGN_OR_RETURN(f.model, bench::fetch_default_model(*client));
  }
  std::vector<bench::ServeRun> runs;
  for (double rate : rates) {
    bench::ServeRunConfig rc;
    rc.model = f.model;
    rc.endpoint = endpoint;
    rc.request_rate = rate;
    rc.burstiness = f.burstiness;
    rc.max_concurrency = f.max_concurrency;
    rc.slo = bench::SloConfig{f.slo_ttft_ms, f.slo_tpot_ms, f.slo_e2e_ms};
    rc.seed = f.data.seed;
    std::cerr << "kite bench serve: " << requests.size() << " requests at "
              << (std::isinf(rate) ? std::string("inf") : fmt::format("{:g}", rate)) << " req/s to "
              << f.url << std::endl;
    KITE_ASSIGN_OR_RETURN(bench::ServeRun run, bench::run_serve_benchmark(*client, rc, requests));
    std::cout << bench::format_serve_run(run) << std::flush;
    runs.push_back(std::move(run));
  }
  if (!f.result_json.empty()) {
    nlohmann::json j = {
        {"date", today_utc()},
        {"url", f.url},
        {"model", f.model},
        {"endpoint", f.endpoint},
        {"dataset", f.dataset},
        {"dataset_path", f.data.path},
        {"prompt_format", f.data.format == bench::PromptFormat::kText ? "text" : "token_ids"},
        {"input_len", f.data.input_len},
        {"output_len", f.data.output_len},
        {"prefix_len", f.data.prefix_len},
        {"num_prompts", f.data.num_prompts},
        {"seed", f.data.seed},
        {"token_count_method",
         "output tokens = usage.completion_tokens of the include_usage chunk (else content "
         "chunks); TTFT/ITL from content-chunk arrival times"},
        {"runs", nlohmann::json::array()}};
    for (const auto& r : runs) j["runs"].push_back(r.to_json());
    KITE_RETURN_IF_ERROR(write_text(f.result_json, j.dump(2) + "\n"));
  }
  if (!f.plot.empty()) {
    const std::string title = fmt::format("kite bench serve: {} ({} dataset, in {} / out {})",
                                          f.model, f.dataset, f.data.input_len, f.data.output_len);
    KITE_RETURN_IF_ERROR(write_text(f.plot, bench::render_sweep_html(runs, title)));
  }
  return ok_status();
}

void add_serve(CLI::App* bench, CommandRunner* run) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = bench->add_subcommand(
      "serve", "Load-test an OpenAI-compatible server with streaming requests");
  cmd->add_option("--url", f->url, "Server base URL (default http://127.0.0.1:8000)");
  cmd->add_option("--model", f->model,
                  "The request's model field (default: the first of GET /v1/models)");
  cmd->add_option("--dataset", f->dataset, "random | shared-prefix | jsonl")
      ->check(CLI::IsMember({"random", "shared-prefix", "jsonl"}));
  cmd->add_option("--dataset-path", f->data.path,
                  "JSONL file: {\"prompt\": ...} or {\"messages\": [...]} per line");
  cmd->add_option("--input-len", f->data.input_len, "Prompt tokens (random part; default 1024)")
      ->check(kNonNegative);
  cmd->add_option("--output-len", f->data.output_len, "max_tokens of every request (default 128)")
      ->check(kPositive);
  cmd->add_option("--prefix-len", f->data.prefix_len, "shared-prefix: tokens of the common prefix");
  cmd->add_option("--num-prefixes", f->data.num_prefixes, "shared-prefix: distinct prefixes")
      ->check(kPositive);
  cmd->add_option("--num-prompts", f->data.num_prompts, "Requests per rate (default 1000)")
      ->check(kPositive);
  cmd->add_option("--vocab-size", f->data.vocab_size,
                  "Random token ids are drawn below this (default 10000)")
      ->check(kPositive);
  cmd->add_option("--prompt-format", f->prompt_format,
                  "auto (token ids for completions, text for chat) | ids | text")
      ->check(CLI::IsMember({"auto", "ids", "text"}));
  cmd->add_option("--endpoint", f->endpoint, "completions | chat")
      ->check(CLI::IsMember({"completions", "chat"}));
  cmd->add_option("--request-rate", f->rates,
                  "Requests/s, 'inf' for all at once; a comma list sweeps");
  cmd->add_option("--burstiness", f->burstiness, "Gamma shape of inter-arrival gaps (1 = Poisson)");
  cmd->add_option("--max-concurrency", f->max_concurrency,
                  "Most requests in flight (default: no cap)")
      ->check(kPositive);
  cmd->add_option("--slo-ttft-ms", f->slo_ttft_ms, "Goodput SLO on TTFT");
  cmd->add_option("--slo-tpot-ms", f->slo_tpot_ms, "Goodput SLO on TPOT");
  cmd->add_option("--slo-e2e-ms", f->slo_e2e_ms, "Goodput SLO on end-to-end latency");
  cmd->add_option("--seed", f->data.seed, "Seed of prompts and arrivals");
  cmd->add_option("--timeout-s", f->timeout_s, "Per read/connect timeout")->check(kPositive);
  cmd->add_option("--result-json", f->result_json,
                  "Write metrics and per-request measurements here")
      ->check(kWritableFile);
  cmd->add_option("--plot", f->plot, "Write an HTML page with SVG plots of latency vs request rate")
      ->check(kWritableFile);
  cmd->callback([run, f] { *run = [f] { return run_serve(*f); }; });
}

// Shared by latency and throughput: engine flags plus --result-json.
struct OfflineFlags {
  EngineConfig engine;
  std::string result_json;
};

Status write_offline_result(const std::string& path, const Engine& engine, const char* kind,
                            nlohmann::json result) {
  if (path.empty()) return ok_status();
  nlohmann::json j = {{"date", today_utc()},
                      {"benchmark", kind},
                      {"model", bench::describe_model(engine)},
                      {"result", std::move(result)}};
  return write_text(path, j.dump(2) + "\n");
}

void add_latency(CLI::App* bench, CommandRunner* run) {
  struct Flags : OfflineFlags {
    bench::LatencyConfig c;
  };
  auto f = std::make_shared<Flags>();
  f->engine.enable_prefix_caching = false;
  auto* cmd = bench->add_subcommand(
      "latency", "In-process prefill and decode latency (batch of --batch-size)");
  add_engine_flags(cmd, &f->engine);
  cmd->add_option("--input-len", f->c.input_len, "Prompt tokens (random ids)")->check(kPositive);
  cmd->add_option("--output-len", f->c.output_len, "Generated tokens (>= 2)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--batch-size", f->c.batch_size, "Requests run together")->check(kPositive);
  cmd->add_option("--iters", f->c.iters, "Measured iterations")->check(kPositive);
  cmd->add_option("--warmup-iters", f->c.warmup_iters, "Unmeasured iterations first")
      ->check(kNonNegative);
  cmd->add_option("--seed", f->c.seed, "Seed of the random prompts");
  cmd->add_option("--result-json", f->result_json, "Write the result here")->check(kWritableFile);
  cmd->callback([run, f] {
    *run = [f]() -> Status {
      resolve_model_dir(&f->engine);
      KITE_ASSIGN_OR_RETURN(LLM llm, LLM::create(f->engine));
      KITE_ASSIGN_OR_RETURN(bench::LatencyReport report,
                            bench::run_latency_benchmark(llm.engine(), f->c));
      std::cout << report.format() << std::flush;
      return write_offline_result(f->result_json, llm.engine(), "latency", report.to_json());
    };
  });
}

void add_throughput(CLI::App* bench, CommandRunner* run) {
  struct Flags : OfflineFlags {
    bench::ThroughputConfig c;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd =
      bench->add_subcommand("throughput", "Offline throughput: every prompt submitted at once");
  add_engine_flags(cmd, &f->engine);
  cmd->add_option("--input-len", f->c.input_len, "Prompt tokens (random ids)")->check(kPositive);
  cmd->add_option("--output-len", f->c.output_len, "Generated tokens")->check(kPositive);
  cmd->add_option("--num-prompts", f->c.num_prompts, "Requests")->check(kPositive);
  cmd->add_option("--seed", f->c.seed, "Seed of the random prompts");
  cmd->add_option("--result-json", f->result_json, "Write the result here")->check(kWritableFile);
  cmd->callback([run, f] {
    *run = [f]() -> Status {
      resolve_model_dir(&f->engine);
      KITE_ASSIGN_OR_RETURN(LLM llm, LLM::create(f->engine));
      KITE_ASSIGN_OR_RETURN(bench::ThroughputReport report,
                            bench::run_throughput_benchmark(llm, f->c));
      std::cout << report.format() << std::flush;
      return write_offline_result(f->result_json, llm.engine(), "throughput", report.to_json());
    };
  });
}

}  // namespace

void add_bench_command(CLI::App& app, CommandRunner* run) {
  auto* bench =
      app.add_subcommand("bench", "Benchmarks: serve (HTTP load generator), latency, throughput");
  bench->require_subcommand(1);
  add_serve(bench, run);
  add_latency(bench, run);
  add_throughput(bench, run);
}

}  // namespace kite::cli
