#include "engine/llm.h"

#include <condition_variable>
#include <deque>
#include <mutex>

namespace kite {
namespace {

// Events of several requests, handed from the engine thread to the waiting caller.
class EventQueue {
 public:
  void push(const RequestOutput& out) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(out);
    }
    cv_.notify_one();
  }
  RequestOutput pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !events_.empty(); });
    RequestOutput out = std::move(events_.front());
    events_.pop_front();
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> events_;
};

void accumulate(GenerateResult& r, const RequestOutput& out) {
  r.token_ids.insert(r.token_ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
  r.text += out.text_delta;
  r.logprobs.insert(r.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
  r.num_prompt_tokens = out.num_prompt_tokens;
  r.num_cached_tokens = out.num_cached_tokens;
  if (out.finish_reason) r.finish_reason = *out.finish_reason;
  if (!out.error_message.empty()) r.error_message = out.error_message;
}

}  // namespace

Result<LLM> LLM::create(const EngineConfig& config) {
  KITE_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(config));
  return LLM(std::move(engine));
}

Result<std::vector<GenerateResult>> LLM::generate(const std::vector<GenerateInput>& inputs) {
  auto queue = std::make_shared<EventQueue>();
  std::vector<GenerateResult> results(inputs.size());
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string id = "llm-" + std::to_string(next_id_++);
    index[id] = i;
    EngineRequest req{id, inputs[i].prompt_token_ids, inputs[i].sampling, inputs[i].priority};
    Status st =
        engine_->add_request(std::move(req), [queue](const RequestOutput& o) { queue->push(o); });
    if (!st.ok()) {
      for (const auto& [other, j] : index)
        if (other != id) engine_->abort(other);
      // Drain the aborted ones so no callback outlives this call's queue use.
      for (size_t done = 0; done + 1 < index.size();)
        if (queue->pop().finished()) ++done;
      return st.with_context("request " + std::to_string(i));
    }
  }
  for (size_t done = 0; done < inputs.size();) {
    RequestOutput out = queue->pop();
    accumulate(results[index.at(out.request_id)], out);
    if (out.finished()) ++done;
  }
  return results;
}

Result<GenerateResult> LLM::generate_stream(
    const GenerateInput& input, const std::function<void(const RequestOutput&)>& on_output) {
  auto queue = std::make_shared<EventQueue>();
  std::string id = "llm-" + std::to_string(next_id_++);
  EngineRequest req{id, input.prompt_token_ids, input.sampling, input.priority};
  KITE_RETURN_IF_ERROR(
      engine_->add_request(std::move(req), [queue](const RequestOutput& o) { queue->push(o); }));
  GenerateResult result;
  while (true) {
    RequestOutput out = queue->pop();
    accumulate(result, out);
    on_output(out);
    if (out.finished()) break;
  }
  return result;
}

}  // namespace kite
