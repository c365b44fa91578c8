#include "engine/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "engine/kv_budget.h"
#include "engine/placeholder_tokenizer.h"
#include "model/config.h"
#include "quant/calibration.h"
#include "sampling/stop_checker.h"

namespace kite {

struct Engine::Active {
  EngineRequest request;
  OutputCallback callback;
  Sampler sampler;
  StopChecker stop;
  IncrementalDetokenizer detok;
  std::vector<int32_t> output_ids;
  int32_t num_cached_tokens = 0;
  bool sent_cached = false;
  uint64_t device_seed = 0;  // the random stream's key when sampling on the device
};

namespace {

// EOS ids from config.json, generation_config.json and the tokenizer, deduplicated.
std::vector<int32_t> collect_eos_ids(const std::string& dir, const ModelConfig& config,
                                     const Tokenizer& tokenizer) {
  std::vector<int32_t> ids(config.eos_token_ids.begin(), config.eos_token_ids.end());
  std::ifstream f(dir + "/generation_config.json");
  if (f) {
    auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("eos_token_id")) {
      const auto& e = j["eos_token_id"];
      if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
      if (e.is_array())
        for (const auto& x : e)
          if (x.is_number_integer()) ids.push_back(x.get<int32_t>());
    }
  }
  if (auto eos = tokenizer.eos_id()) ids.push_back(*eos);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

Result<Tokenizer> load_tokenizer(const EngineConfig& config) {
  Result<Tokenizer> tokenizer = Tokenizer::from_dir(config.model_dir);
  if (tokenizer.ok() || config.load_format != LoadFormat::kDummy ||
      tokenizer.status().code() != ErrorCode::kNotFound)
    return tokenizer;
  spdlog::warn(
      "{} has no tokenizer.json: using a byte-level placeholder tokenizer "
      "(text encodes as raw bytes; generated ids decode to \" t<id>\")",
      config.model_dir);
  KITE_ASSIGN_OR_RETURN(const ModelConfig model_config, load_model_config(config.model_dir));
  return placeholder_tokenizer(model_config.vocab_size);
}

// The model's cache layout in the dtype --kv-cache-dtype asks for.
KvCacheSpec engine_kv_spec(const Model& model, const EngineConfig& config) {
  KvCacheSpec spec = model.kv_cache_spec();
  spec.dtype = model.backend().compute_dtype();  // F32 on the CPU, BF16 on CUDA
  if (config.quant.kv_cache_dtype == KvCacheDtype::kFp8) spec.dtype = DType::kF8E4M3;
  spec.k_scales = config.kv_cache_k_scales;
  spec.v_scales = config.kv_cache_v_scales;
  return spec;
}

std::string finish_name(sched::RequestStatus s) {
  switch (s) {
    case sched::RequestStatus::kFinishedStopped:
      return "stop";
    case sched::RequestStatus::kFinishedLength:
      return "length";
    case sched::RequestStatus::kFinishedAborted:
      return "abort";
    default:
      return "error";
  }
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  KITE_ASSIGN_OR_RETURN(Tokenizer tokenizer, load_tokenizer(config));
  KITE_ASSIGN_OR_RETURN(Device device, parse_device(config.device, has_backend(Device::kCuda)));

  LoadOptions load;
  load.load_format = config.load_format;
  load.device = device;
  load.quant = config.quant;
  KITE_RETURN_IF_ERROR(check_load_options(config.model_dir, load));
  KITE_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, load_quantized_model(config.model_dir, load));
  const KvCacheSpec spec = engine_kv_spec(*model, config);
  // Refused here, before any request, rather than at the first attention call.
  if (spec.dtype == DType::kF8E4M3 &&
      !model->backend().reads_fp8_kv(spec.k_head_dim, spec.v_head_dim, spec.shares_kv))
    return unsupported("--kv-cache-dtype fp8: the " + std::string(device_name(device)) +
                       " backend has no attention kernel for FP8 caches of this model's shape (" +
                       (spec.shares_kv ? "a latent cache of " + std::to_string(spec.k_head_dim)
                                       : "heads of " + std::to_string(spec.k_head_dim) + " / " +
                                             std::to_string(spec.v_head_dim)) +
                       " dims); use --device cpu or the default KV dtype");
  KITE_ASSIGN_OR_RETURN(const int64_t num_blocks, kv_cache_blocks(*model, spec, config));
  // After the profiling forward: graphs are captured from real decode steps only.
  model->backend().set_step_graphs(config.enforce_eager ? 0 : config.max_num_seqs);
  sched::SchedulerConfig sc;
  sc.num_blocks = static_cast<int32_t>(num_blocks);
  sc.block_size = config.block_size;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  sc.max_num_seqs = config.max_num_seqs;
  sc.long_prefill_token_threshold = config.long_prefill_token_threshold;
  const int64_t model_len = model->config().max_position_embeddings;
  sc.max_model_len =
      static_cast<int32_t>(config.max_model_len > 0 ? config.max_model_len : model_len);
  if (model_len > 0 && sc.max_model_len > model_len)
    return invalid_argument("--max-model-len " + std::to_string(sc.max_model_len) +
                            " exceeds the model's max_position_embeddings " +
                            std::to_string(model_len));
  // add_request() is the admission gate (running + queued <= max_waiting + max_num_seqs, HTTP
  // 429 beyond). Requests it admitted reach the scheduler together at the next step, all still
  // waiting, so the scheduler's own bound must hold all of them or it would fail admitted ones.
  sc.max_waiting = config.max_waiting + config.max_num_seqs;
  sc.enable_prefix_caching = config.enable_prefix_caching;
  sc.prefix_cache_salt = config.model_dir;
  KITE_ASSIGN_OR_RETURN(sched::Scheduler scheduler, sched::Scheduler::create(sc));
  spdlog::info("KV cache: {} blocks of {} tokens ({} tokens, {:.1f} MiB)", num_blocks,
               config.block_size, num_blocks * config.block_size,
               num_blocks * config.block_size * spec.bytes_per_token() / 1048576.0);
  EngineConfig engine_config = config;
  if (config.quant.kv_cache_dtype == KvCacheDtype::kFp8 && !config.quant.calibration_text.empty()) {
    KITE_ASSIGN_OR_RETURN(KvScales scales, calibrate_kv_scales(config.model_dir, load));
    engine_config.kv_cache_k_scales = scales.k;
    engine_config.kv_cache_v_scales = scales.v;
  }
  return std::unique_ptr<Engine>(new Engine(engine_config, std::move(model), std::move(tokenizer),
                                            std::move(scheduler), num_blocks));
}

Engine::Engine(EngineConfig config, std::unique_ptr<Model> model, Tokenizer tokenizer,
               sched::Scheduler scheduler, int64_t num_blocks)
    : config_(std::move(config)),
      model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      cache_(engine_kv_spec(*model_, config_), num_blocks, config_.block_size, model_->backend()),
      runner_(*model_, cache_),
      scheduler_(std::move(scheduler)) {
  eos_ids_ = collect_eos_ids(config_.model_dir, model_->config(), tokenizer_);
  max_model_len_ = scheduler_.config().max_model_len;
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Engine::add_request(EngineRequest request, OutputCallback callback) {
  KITE_RETURN_IF_ERROR(request.sampling.validate());
  const int64_t prompt = static_cast<int64_t>(request.prompt_token_ids.size());
  if (prompt == 0) return invalid_argument("the prompt is empty");
  for (int32_t id : request.prompt_token_ids)
    if (id < 0 || id >= model_->config().vocab_size)
      return invalid_argument("prompt token id " + std::to_string(id) +
                              " is outside the vocabulary (size " +
                              std::to_string(model_->config().vocab_size) + ")");
  if (prompt >= max_model_len_)
    return invalid_argument("the prompt has " + std::to_string(prompt) +
                            " tokens but the maximum context length is " +
                            std::to_string(max_model_len_));
  const int64_t room = max_model_len_ - prompt;
  if (request.sampling.max_tokens && *request.sampling.max_tokens > room)
    return invalid_argument("prompt (" + std::to_string(prompt) + " tokens) + max_tokens (" +
                            std::to_string(*request.sampling.max_tokens) +
                            ") exceeds the maximum context length " +
                            std::to_string(max_model_len_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Status(ErrorCode::kResourceExhausted, "the engine is shutting down");
    if (num_queued_.load() >= config_.max_waiting + config_.max_num_seqs)
      return Status(
          ErrorCode::kResourceExhausted,
          "too many requests in flight (" + std::to_string(num_queued_.load()) + "); retry later");
    ++num_queued_;
    inbox_adds_.emplace_back(std::move(request), std::move(callback));
  }
  cv_.notify_one();
  return ok_status();
}

void Engine::abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_aborts_.push_back(request_id);
  }
  cv_.notify_one();
}

sched::SchedulerStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status Engine::check_integrity() {
  std::promise<Status> done;
  auto result = done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_tasks_.push_back([&] { done.set_value(scheduler_.check_integrity()); });
  }
  cv_.notify_one();
  return result.get();
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || !inbox_adds_.empty() || !inbox_aborts_.empty() || !inbox_tasks_.empty() ||
               scheduler_.has_unfinished_requests();
      });
      if (stop_) break;
    }
    drain_inbox();
    if (scheduler_.has_unfinished_requests()) step();
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = scheduler_.stats();
  }
  // Shutdown: whoever is still waiting learns that its request ended.
  drain_inbox();
  for (auto& [id, a] : active_) {
    RequestOutput out;
    finish(*a, out, "abort");
  }
  active_.clear();
}

void Engine::drain_inbox() {
  std::deque<std::pair<EngineRequest, OutputCallback>> adds;
  std::deque<std::string> aborts;
  std::deque<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    adds.swap(inbox_adds_);
    aborts.swap(inbox_aborts_);
    tasks.swap(inbox_tasks_);
  }
  for (auto& [req, cb] : adds) {
    const int32_t prompt = static_cast<int32_t>(req.prompt_token_ids.size());
    sched::RequestParams p;
    p.request_id = req.request_id;
    p.prompt_token_ids = req.prompt_token_ids;
    p.max_tokens = req.sampling.max_tokens.value_or(max_model_len_ - prompt);
    p.priority = req.priority;
    p.stop_token_ids = req.sampling.stop_token_ids;
    p.eos_token_ids = eos_ids_;
    p.ignore_eos = req.sampling.ignore_eos;
    auto sampler = Sampler::create(req.sampling);
    Status st = sampler.ok() ? scheduler_.add_request(p) : sampler.status();
    if (!st.ok()) {
      RequestOutput out;
      out.request_id = req.request_id;
      out.finish_reason = "error";
      out.error_message = st.message();
      out.num_prompt_tokens = prompt;
      --num_queued_;
      cb(out);
      continue;
    }
    SamplingParams sp = req.sampling;
    if (!sp.max_tokens) sp.max_tokens = p.max_tokens;
    auto a = std::make_unique<Active>(Active{std::move(req),
                                             std::move(cb),
                                             std::move(*sampler),
                                             StopChecker(sp, eos_ids_),
                                             IncrementalDetokenizer(tokenizer_, true),
                                             {},
                                             0,
                                             false});
    a->device_seed = a->sampler.params().seed.value_or(seed_source_());
    active_.emplace(p.request_id, std::move(a));
  }
  for (const std::string& id : aborts) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    (void)scheduler_.abort(id);
    RequestOutput out;
    finish(*it->second, out, "abort");
    active_.erase(it);
  }
  for (auto& task : tasks) task();
}

void Engine::emit_token(Active& a, int32_t token, const SampleResult* sample, RequestOutput& out) {
  a.output_ids.push_back(token);
  out.new_token_ids.push_back(token);
  if (sample && sample->logprob)
    out.logprobs.push_back(TokenLogprobs{token, *sample->logprob, sample->top_logprobs});
  StopUpdate u = a.stop.append(token, a.detok.add(token));
  out.text_delta += u.text;
  if (u.finish_reason) {
    out.finish_reason = std::string(finish_reason_name(*u.finish_reason));
    out.stop_reason = u.stop_string;
  }
}

void Engine::finish(Active& a, RequestOutput& out, std::string reason) {
  if (!a.stop.finished()) {
    // Release text held back as a possible stop-string start, then any incomplete UTF-8
    // tail of the detokenizer (as U+FFFD, exactly as a full decode would show it).
    StopUpdate f = a.stop.finish(reason == "length" ? FinishReason::kLength : FinishReason::kStop);
    out.text_delta += f.text;
    out.text_delta += a.detok.finish();
  }
  out.request_id = a.request.request_id;
  if (!out.finish_reason) out.finish_reason = std::move(reason);
  out.num_prompt_tokens = static_cast<int32_t>(a.request.prompt_token_ids.size());
  out.num_output_tokens = static_cast<int32_t>(a.output_ids.size());
  out.num_cached_tokens = a.num_cached_tokens;
  --num_queued_;
  a.callback(out);
}

void Engine::step() {
  sched::SchedulerOutput plan = scheduler_.schedule();
  std::vector<int32_t> sampled(plan.scheduled.size(), 0);
  std::vector<std::optional<SampleResult>> samples(plan.scheduled.size());
  std::vector<std::string> failed;
  std::string execute_error;
  if (!plan.empty()) {
    std::vector<SequenceChunk> chunks;
    chunks.reserve(plan.scheduled.size());
    for (const auto& s : plan.scheduled)
      chunks.push_back(SequenceChunk{s.token_ids, s.num_computed_tokens, s.block_table,
                                     s.samples_token ? LogitsMode::kLast : LogitsMode::kNone});
    // Sampling where the logits are (no copy of [rows, vocab] to the host) unless a request
    // wants logprobs, which the host sampler computes.
    Backend& be = model_->backend();
    bool on_device = be.samples_on_device() && !config_.host_sampling;
    for (size_t i = 0; i < plan.scheduled.size() && on_device; ++i)
      if (plan.scheduled[i].samples_token &&
          active_.at(plan.scheduled[i].request_id)->sampler.params().logprobs)
        on_device = false;
    Tensor logits;
    try {
      if (on_device) {
        Tensor device_logits = runner_.execute_logits(chunks);
        std::vector<DeviceSamplingRow> rows;
        std::vector<size_t> row_of;  // scheduled index of each row
        for (size_t i = 0; i < plan.scheduled.size(); ++i) {
          if (!plan.scheduled[i].samples_token) continue;
          const Active& a = *active_.at(plan.scheduled[i].request_id);
          rows.push_back({&a.sampler.params(),
                          TokenHistory{a.request.prompt_token_ids, a.output_ids}, a.device_seed,
                          a.output_ids.size()});
          row_of.push_back(i);
        }
        std::vector<int32_t> ids;
        if (!rows.empty()) {
          auto got = be.sample(device_logits, rows);
          if (!got) throw std::logic_error("the backend said it samples but did not");
          ids = std::move(*got);
        }
        for (size_t r = 0; r < rows.size(); ++r) {
          const size_t i = row_of[r];
          if (ids[r] < 0) {
            failed.push_back(plan.scheduled[i].request_id);
            spdlog::error("request {}: the model produced invalid logits (NaN, +inf or all "
                          "-inf)", plan.scheduled[i].request_id);
            continue;
          }
          sampled[i] = ids[r];
          samples[i] = SampleResult{ids[r], std::nullopt, {}};
        }
      } else {
        logits = runner_.execute(chunks);
      }
    } catch (const std::exception& e) {
      // A bug in the model or a kernel must fail this step's requests, not the process.
      spdlog::error("forward step failed: {}", e.what());
      for (const auto& s : plan.scheduled) failed.push_back(s.request_id);
      execute_error = e.what();
    }
    const int64_t vocab = logits.defined() ? logits.size(1) : 0;
    int64_t row = 0;
    for (size_t i = 0; i < plan.scheduled.size() && logits.defined(); ++i) {
      if (!plan.scheduled[i].samples_token) continue;
      const float* r = logits.data<float>() + row++ * vocab;
      Active& a = *active_.at(plan.scheduled[i].request_id);
      TokenHistory history{a.request.prompt_token_ids, a.output_ids};
      auto res = a.sampler.sample({r, static_cast<size_t>(vocab)}, history);
      if (res.ok()) {
        sampled[i] = res->token_id;
        samples[i] = std::move(*res);
      } else {
        failed.push_back(plan.scheduled[i].request_id);
        spdlog::error("request {}: {}", plan.scheduled[i].request_id, res.status().message());
      }
    }
  }
  auto events = scheduler_.update(plan, sampled);
  if (!events.ok()) {
    spdlog::critical("scheduler update failed: {}", events.status().message());
    return;
  }
  std::unordered_map<std::string, const SampleResult*> by_id;
  for (size_t i = 0; i < plan.scheduled.size(); ++i)
    if (samples[i]) by_id[plan.scheduled[i].request_id] = &*samples[i];
  for (const auto& ev : *events) {
    auto it = active_.find(ev.request_id);
    if (it == active_.end()) continue;
    Active& a = *it->second;
    a.num_cached_tokens = ev.num_cached_tokens;
    RequestOutput out;
    out.request_id = ev.request_id;
    bool sampling_failed = std::find(failed.begin(), failed.end(), ev.request_id) != failed.end();
    if (ev.new_token_id && !sampling_failed) {
      auto s = by_id.find(ev.request_id);
      emit_token(a, *ev.new_token_id, s == by_id.end() ? nullptr : s->second, out);
    }
    const bool sched_done = sched::is_finished(ev.status);
    if (sampling_failed) {
      out.error_message = execute_error.empty()
                              ? "sampling failed (the model produced invalid logits)"
                              : "the forward step failed: " + execute_error;
      out.finish_reason = "error";
    } else if (ev.status == sched::RequestStatus::kFinishedError) {
      out.error_message = ev.error_message;
      out.finish_reason = "error";
    }
    if (out.finish_reason || sched_done) {
      if (!sched_done) (void)scheduler_.abort(ev.request_id);  // stop string: free blocks now
      finish(a, out, out.finish_reason.value_or(finish_name(ev.status)));
      active_.erase(it);
    } else {
      out.num_prompt_tokens = static_cast<int32_t>(a.request.prompt_token_ids.size());
      out.num_output_tokens = static_cast<int32_t>(a.output_ids.size());
      out.num_cached_tokens = a.num_cached_tokens;
      a.callback(out);
    }
  }
  // Failed requests that produced no event this step (a prefill chunk) end here too.
  for (const std::string& id : failed) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    (void)scheduler_.abort(id);
    RequestOutput out;
    out.finish_reason = "error";
    out.error_message = "the forward step failed: " + execute_error;
    finish(*it->second, out, "error");
    active_.erase(it);
  }
}

}  // namespace kite
