// One HTTP generation request's engine requests and response bytes; see generation_job.h
// for the threading rules (everything but the engine callback runs on the connection strand).
#include "server/generation_job.h"

namespace kite::server {
namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The request field an engine refusal is about, for the error's "param".
std::string engine_error_param(ApiKind kind, const std::string& message) {
  if (message.find("max_tokens") != std::string::npos) return "max_tokens";
  return kind == ApiKind::kChat ? "messages" : "prompt";
}

}  // namespace

GenerationJob::GenerationJob(JobConfig config, Engine* engine, Metrics* metrics)
    : config_(std::move(config)), engine_(engine), metrics_(metrics) {}

std::optional<ApiError> GenerationJob::start(const std::vector<std::vector<int32_t>>& prompts,
                                             const SamplingParams& sampling, int32_t priority,
                                             Poster post) {
  logprobs_ = sampling.logprobs;
  const size_t n = static_cast<size_t>(config_.n);
  choices_.resize(prompts.size() * n);
  for (size_t index = 0; index < choices_.size(); ++index) {
    Choice& c = choices_[index];
    c.request_id = config_.id + "-" + std::to_string(index);
    c.prompt_index = static_cast<int32_t>(index / n);
    c.num_prompt_tokens = static_cast<int32_t>(prompts[c.prompt_index].size());
  }
  auto self = shared_from_this();
  for (size_t index = 0; index < choices_.size(); ++index) {
    EngineRequest r{choices_[index].request_id, prompts[choices_[index].prompt_index], sampling,
                    priority};
    // Choices of one prompt must differ, yet stay reproducible: seed + i.
    if (sampling.seed) r.sampling.seed = *sampling.seed + index % n;
    Status st = engine_->add_request(std::move(r), [self, post, index](const RequestOutput& out) {
      post([self, index, out] { self->on_output(index, out); });
    });
    if (st.ok()) continue;
    start_failed_ = true;
    for (size_t j = 0; j < index; ++j) engine_->abort(choices_[j].request_id);
    metrics_->record_failure(st.code() == ErrorCode::kResourceExhausted
                                 ? FailureReason::kQueueFull
                                 : FailureReason::kBadRequest);
    return from_status(st, engine_error_param(config_.kind, st.message()));
  }
  return std::nullopt;
}

void GenerationJob::cancel() {
  if (done_ || cancelled_) return;
  cancelled_ = true;
  for (const Choice& c : choices_)
    if (!c.finish_reason) engine_->abort(c.request_id);
}

void GenerationJob::on_output(size_t index, const RequestOutput& out) {
  Choice& c = choices_[index];
  if (c.finish_reason || start_failed_) return;
  record_metrics(c, out);
  c.num_output_tokens = out.num_output_tokens;
  c.num_cached_tokens = out.num_cached_tokens;
  if (config_.stream) {
    stream_event(index, out);
  } else {
    c.text += out.text_delta;
    c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
  }
  if (out.finished()) {
    c.finish_reason = *out.finish_reason;
    c.error_message = out.error_message;
    if (++num_finished_ == choices_.size()) {
      if (config_.stream) finish_stream();
      done_ = true;
    }
  }
  if (waker_) waker_();
}

void GenerationJob::record_metrics(Choice& c, const RequestOutput& out) {
  const auto now = std::chrono::steady_clock::now();
  const size_t num_new = out.new_token_ids.size();
  if (num_new > 0) {
    if (!c.last_token_time) {
      metrics_->observe_time_to_first_token(seconds(now - config_.arrival));
    } else {
      const double per_token = seconds(now - *c.last_token_time) / static_cast<double>(num_new);
      for (size_t k = 0; k < num_new; ++k) metrics_->observe_time_per_output_token(per_token);
    }
    c.last_token_time = now;
  }
  if (!out.finished()) return;
  const std::string& reason = *out.finish_reason;
  if (reason == "stop" || reason == "length") {
    metrics_->record_success(reason == "stop", seconds(now - config_.arrival),
                             out.num_prompt_tokens, out.num_output_tokens);
  } else {
    metrics_->record_failure(
        reason == "abort" ? FailureReason::kClientAborted : FailureReason::kEngineError,
        out.num_prompt_tokens, out.num_output_tokens);
  }
}

Json GenerationJob::stream_choice(size_t index, const RequestOutput& out) {
  Choice& c = choices_[index];
  Json choice = {{"index", index}};
  if (config_.kind == ApiKind::kChat) {
    Json delta = Json::object();
    if (!out.text_delta.empty()) delta["content"] = out.text_delta;
    choice["delta"] = std::move(delta);
    choice["logprobs"] =
        logprobs_ ? chat_logprobs(engine_->tokenizer(), out.logprobs) : Json(nullptr);
  } else {
    choice["text"] = out.text_delta;
    choice["logprobs"] =
        logprobs_ ? completion_logprobs(engine_->tokenizer(), out.logprobs, &c.text_chars)
                  : Json(nullptr);
  }
  choice["finish_reason"] = out.finish_reason ? Json(*out.finish_reason) : Json(nullptr);
  return choice;
}

void GenerationJob::stream_event(size_t index, const RequestOutput& out) {
  Choice& c = choices_[index];
  const bool chat = config_.kind == ApiKind::kChat;
  const ResponseHeader h{config_.id, chat ? "chat.completion.chunk" : "text_completion",
                         config_.created, config_.model};
  auto emit = [&](Json choice) {
    Json chunk = response_object(h, Json::array({std::move(choice)}));
    if (config_.include_usage) chunk["usage"] = nullptr;
    pending_ += sse_event(chunk);
  };
  if (chat && !c.sent_role) {
    c.sent_role = true;
    emit(Json{{"index", index},
              {"delta", {{"role", "assistant"}, {"content", ""}}},
              {"logprobs", nullptr},
              {"finish_reason", nullptr}});
  }
  if (out.finish_reason == "error") {
    // The OpenAI clients raise an APIError for an event carrying "error".
    pending_ += sse_event(Json::parse(internal(out.error_message).to_json()));
    return;
  }
  if (!out.text_delta.empty() || !out.logprobs.empty() || out.finished())
    emit(stream_choice(index, out));
}

void GenerationJob::finish_stream() {
  if (config_.include_usage) {
    const ResponseHeader h{
        config_.id, config_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion",
        config_.created, config_.model};
    Json chunk = response_object(h, Json::array());
    chunk["usage"] = usage_json(usage());
    pending_ += sse_event(chunk);
  }
  pending_ += kSseDone;
}

Usage GenerationJob::usage() const {
  // A prompt counts once however many choices share it; cached tokens are the best any
  // of its choices got.
  Usage u;
  const size_t n = static_cast<size_t>(config_.n);
  for (size_t first = 0; first < choices_.size(); first += n) {
    u.prompt_tokens += choices_[first].num_prompt_tokens;
    int64_t cached = 0;
    for (size_t i = first; i < first + n; ++i) {
      cached = std::max<int64_t>(cached, choices_[i].num_cached_tokens);
      u.completion_tokens += choices_[i].num_output_tokens;
    }
    u.cached_tokens += cached;
  }
  return u;
}

HttpResponse GenerationJob::final_response() const {
  for (const Choice& c : choices_) {
    if (c.finish_reason == "error")
      return internal("generation failed: " + c.error_message).to_response();
    if (c.finish_reason == "abort")
      return service_unavailable("the request was aborted (server shutting down)").to_response();
  }
  const bool chat = config_.kind == ApiKind::kChat;
  Json choices = Json::array();
  for (size_t index = 0; index < choices_.size(); ++index) {
    const Choice& c = choices_[index];
    Json choice = {{"index", index}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      choice["logprobs"] =
          logprobs_ ? chat_logprobs(engine_->tokenizer(), c.logprobs) : Json(nullptr);
    } else {
      int64_t chars = 0;
      choice["text"] = c.text;
      choice["logprobs"] =
          logprobs_ ? completion_logprobs(engine_->tokenizer(), c.logprobs, &chars) : Json(nullptr);
    }
    choice["finish_reason"] = *c.finish_reason;
    choices.push_back(std::move(choice));
  }
  const ResponseHeader h{config_.id, chat ? "chat.completion" : "text_completion", config_.created,
                         config_.model};
  Json body = response_object(h, std::move(choices));
  body["usage"] = usage_json(usage());
  HttpResponse r;
  r.body = dump_json(body);
  return r;
}

}  // namespace kite::server
