// Engine: one thread that owns the scheduler, the KV cache and the model runner, and runs
// step = schedule → execute → sample → update → emit until there is no work (DESIGN.md §2).
//
// Other threads talk to it only through add_request() / abort() (a locked inbox, applied at
// the start of the next step) and the per-request OutputCallback (called on the engine thread).
// Nothing else touches the scheduler, the block pool or the runner.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "core/status.h"
#include "engine/engine_config.h"
#include "engine/request_output.h"
#include "model/model.h"
#include "runtime/model_runner.h"
#include "sched/scheduler.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kite {

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  ~Engine();  // aborts what is left and joins the engine thread

  // Validates the request (sampling parameters, prompt length, queue bound) and queues it.
  // kInvalidArgument -> HTTP 400, kResourceExhausted -> 429. Every accepted request gets
  // callback events until one with finish_reason.
  Status add_request(EngineRequest request, OutputCallback callback);
  // Cancels a request (its KV blocks are released in the engine's next step); its callback
  // gets a final event with finish_reason "abort". Unknown or finished ids are ignored.
  void abort(const std::string& request_id);

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const ModelConfig& model_config() const { return model_->config(); }
  // Dtype of the weights on the model's backend (F32 on the CPU, BF16 on CUDA).
  DType weight_dtype() const { return model_->backend().compute_dtype(); }
  const EngineConfig& config() const { return config_; }
  int32_t max_model_len() const { return max_model_len_; }
  int64_t num_kv_blocks() const { return cache_.num_blocks(); }
  // Snapshot taken after every step.
  sched::SchedulerStats stats() const;
  // Block pool + request accounting check, run on the engine thread between steps.
  Status check_integrity();

 private:
  struct Active;  // per-request engine-thread state
  Engine(EngineConfig config, std::unique_ptr<Model> model, Tokenizer tokenizer,
         sched::Scheduler scheduler, int64_t num_blocks);
  void loop();
  void drain_inbox();
  void step();
  void emit_token(Active& a, int32_t token, const SampleResult* sample, RequestOutput& out);
  void finish(Active& a, RequestOutput& out, std::string reason);

  EngineConfig config_;
  std::unique_ptr<Model> model_;
  Tokenizer tokenizer_;
  std::vector<int32_t> eos_ids_;
  int32_t max_model_len_ = 0;
  KvCache cache_;
  ModelRunner runner_;
  sched::Scheduler scheduler_;
  std::unordered_map<std::string, std::unique_ptr<Active>> active_;  // engine thread only
  std::mt19937_64 seed_source_{std::random_device{}()};  // device-sampling seeds of unseeded requests

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<EngineRequest, OutputCallback>> inbox_adds_;
  std::deque<std::string> inbox_aborts_;
  std::deque<std::function<void()>> inbox_tasks_;  // run on the engine thread between steps
  std::atomic<int64_t> num_queued_{0};  // accepted, not yet finished (for the queue bound)
  sched::SchedulerStats stats_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kite
