// kite_sched_bench: CPU cost of one scheduler step (schedule() + update()) with N running
// sequences, no model. The runner is replaced by a random "sampled token" per request.
//
//   ./build/kite_sched_bench                       # 256 decoding sequences, 2000 steps
//   ./build/kite_sched_bench --mixed               # finished requests replaced by new prompts
//   ./build/kite_sched_bench --seqs 512 --prompt-len 2048 --steps 5000
//
// Decode mode: every sequence decodes every step (a new KV block every block_size steps, a
// prefix hash per filled block). Mixed mode: max_tokens is random, and each finished request
// is replaced by one with a new prompt sharing a system prefix, so steps mix chunked prefills,
// prefix-cache hits, block frees and decodes. Time is thread CPU time, per step.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace {

using kite::sched::RequestParams;
using kite::sched::Scheduler;
using kite::sched::SchedulerConfig;
using kite::sched::SchedulerOutput;

struct Options {
  int seqs = 256;
  int steps = 2000;
  int prompt_len = 512;
  int block_size = 16;
  bool mixed = false;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next_int = [&](int& out) {
      if (i + 1 >= argc) return false;
      out = std::atoi(argv[++i]);
      return out > 0;
    };
    bool ok = true;
    if (a == "--seqs")
      ok = next_int(o.seqs);
    else if (a == "--steps")
      ok = next_int(o.steps);
    else if (a == "--prompt-len")
      ok = next_int(o.prompt_len);
    else if (a == "--block-size")
      ok = next_int(o.block_size);
    else if (a == "--mixed")
      o.mixed = true;
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr,
                   "usage: kite_sched_bench [--seqs N] [--steps N] [--prompt-len N] "
                   "[--block-size N] [--mixed]\n(bad or unknown argument '%s')\n",
                   a.c_str());
      return false;
    }
  }
  return true;
}

double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

class Bench {
 public:
  explicit Bench(const Options& o) : o_(o), rng_(42), system_(random_tokens(o.prompt_len / 2)) {}

  int run() {
    const int max_tokens_cap = o_.mixed ? 512 : o_.steps + 64;
    SchedulerConfig c;
    c.block_size = o_.block_size;
    c.max_num_seqs = o_.seqs;
    c.max_num_batched_tokens = 8192;
    c.max_model_len = o_.prompt_len + max_tokens_cap;
    c.max_waiting = o_.seqs * 4;
    // Enough blocks for every sequence at full length: this measures scheduling, not preemption.
    c.num_blocks = o_.seqs * ((c.max_model_len + o_.block_size - 1) / o_.block_size) + 64;
    auto created = Scheduler::create(c);
    if (!created.ok()) {
      std::fprintf(stderr, "error: %s\n", created.status().message().c_str());
      return 1;
    }
    Scheduler& s = created.value();
    for (int i = 0; i < o_.seqs; ++i) add(s, max_tokens_cap);
    // Warm up until every sequence is decoding.
    for (int i = 0; i < 200 && !all_decoding(s); ++i) step(s, max_tokens_cap, nullptr);

    std::vector<double> schedule_us, update_us;
    schedule_us.reserve(static_cast<size_t>(o_.steps));
    update_us.reserve(static_cast<size_t>(o_.steps));
    int64_t tokens = 0, sched_reqs = 0;
    for (int i = 0; i < o_.steps; ++i) {
      StepTimes t = step(s, max_tokens_cap, &tokens);
      schedule_us.push_back(t.schedule_us);
      update_us.push_back(t.update_us);
      sched_reqs += t.num_scheduled;
    }
    report(s, schedule_us, update_us, tokens, sched_reqs);
    return s.check_integrity().ok() ? 0 : 1;
  }

 private:
  struct StepTimes {
    double schedule_us;
    double update_us;
    int64_t num_scheduled;
  };

  std::vector<int32_t> random_tokens(int n) {
    std::uniform_int_distribution<int32_t> tok(1, 120000);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = tok(rng_);
    return t;
  }

  void add(Scheduler& s, int max_tokens_cap) {
    RequestParams p;
    p.request_id = "chatcmpl-bench-" + std::to_string(next_id_++);
    p.prompt_token_ids = system_;
    const std::vector<int32_t> tail =
        random_tokens(o_.prompt_len - static_cast<int>(system_.size()));
    p.prompt_token_ids.insert(p.prompt_token_ids.end(), tail.begin(), tail.end());
    p.max_tokens =
        o_.mixed ? std::uniform_int_distribution<int>(64, max_tokens_cap)(rng_) : max_tokens_cap;
    p.ignore_eos = true;
    if (const kite::Status st = s.add_request(std::move(p)); !st.ok()) {
      std::fprintf(stderr, "add_request: %s\n", st.message().c_str());
      std::exit(1);
    }
  }

  bool all_decoding(const Scheduler& s) { return s.num_waiting() == 0 && last_all_decode_; }

  StepTimes step(Scheduler& s, int max_tokens_cap, int64_t* tokens) {
    const double t0 = thread_cpu_us();
    const SchedulerOutput out = s.schedule();
    const double t1 = thread_cpu_us();
    sampled_.resize(out.scheduled.size());
    last_all_decode_ = true;
    for (size_t i = 0; i < sampled_.size(); ++i) {
      sampled_[i] = static_cast<int32_t>(rng_() % 120000);
      last_all_decode_ &= out.scheduled[i].num_scheduled_tokens == 1;
    }
    const double t2 = thread_cpu_us();
    auto events = s.update(out, sampled_);
    const double t3 = thread_cpu_us();
    if (!events.ok()) {
      std::fprintf(stderr, "update: %s\n", events.status().message().c_str());
      std::exit(1);
    }
    if (tokens) *tokens += out.total_num_scheduled_tokens;
    for (const auto& e : *events) {
      if (is_finished(e.status)) add(s, max_tokens_cap);  // (only in --mixed)
    }
    return {t1 - t0, t3 - t2, static_cast<int64_t>(out.scheduled.size())};
  }

  static double percentile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  }

  void report(const Scheduler& s, const std::vector<double>& sch, const std::vector<double>& upd,
              int64_t tokens, int64_t sched_reqs) {
    std::vector<double> total(sch.size());
    double sum = 0;
    for (size_t i = 0; i < sch.size(); ++i) sum += total[i] = sch[i] + upd[i];
    const double n = static_cast<double>(total.size());
    const auto st = s.stats();
    std::printf("mode=%s seqs=%d steps=%d prompt_len=%d block_size=%d\n",
                o_.mixed ? "mixed" : "decode", o_.seqs, o_.steps, o_.prompt_len, o_.block_size);
    std::printf(
        "avg scheduled requests/step %.1f, tokens/step %.1f, kv usage %.2f, "
        "prefix hits %lld/%lld tokens\n",
        static_cast<double>(sched_reqs) / n, static_cast<double>(tokens) / n, st.kv_cache_usage,
        static_cast<long long>(st.prefix_cache_hits),
        static_cast<long long>(st.prefix_cache_queries));
    std::printf("schedule+update CPU us/step: mean %.1f p50 %.1f p99 %.1f max %.1f\n", sum / n,
                percentile(total, 0.5), percentile(total, 0.99), percentile(total, 1.0));
    std::printf("  schedule p50 %.1f  update p50 %.1f\n", percentile(sch, 0.5),
                percentile(upd, 0.5));
  }

  Options o_;
  std::mt19937 rng_;
  std::vector<int32_t> system_;
  std::vector<int32_t> sampled_;
  int64_t next_id_ = 0;
  bool last_all_decode_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  return Bench(o).run();
}
