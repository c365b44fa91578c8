#include "bench/openai_stream.h"

namespace kite::bench {

Result<Endpoint> parse_endpoint(const std::string& name) {
  if (name == "completions") return Endpoint::kCompletions;
  if (name == "chat") return Endpoint::kChat;
  return invalid_argument("unknown endpoint '" + name + "' (expected completions or chat)");
}

const char* endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
}

Result<nlohmann::json> make_request_body(const BenchRequest& r, Endpoint endpoint,
                                         const std::string& model) {
  nlohmann::json body = {{"model", model},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"max_tokens", r.output_len},
                         {"ignore_eos", true},
                         {"temperature", 0.0}};
  if (endpoint == Endpoint::kChat) {
    if (!r.messages.is_null()) {
      body["messages"] = r.messages;
    } else if (r.prompt_token_ids.empty()) {
      body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", r.prompt_text}}});
    } else {
      return invalid_argument(
          "the chat endpoint takes text: token-id prompts need --endpoint completions");
    }
  } else {
    if (!r.messages.is_null())
      return invalid_argument("a {\"messages\": ...} prompt needs --endpoint chat");
    if (r.prompt_token_ids.empty())
      body["prompt"] = r.prompt_text;
    else
      body["prompt"] = r.prompt_token_ids;
  }
  return body;
}

double RequestResult::tpot_s() const {
  return output_tokens >= 2 ? (e2e_s - ttft_s) / static_cast<double>(output_tokens - 1) : 0.0;
}

bool StreamRecorder::is_content(const nlohmann::json& choice) const {
  const bool finishing = choice.contains("finish_reason") && !choice["finish_reason"].is_null();
  auto non_empty = [](const nlohmann::json& obj, const char* key) {
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
  };
  if (endpoint_ == Endpoint::kCompletions) {
    if (non_empty(choice, "text")) return true;
    return choice.contains("text") && !finishing;
  }
  auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return false;
  if (non_empty(*delta, "content") || non_empty(*delta, "reasoning_content")) return true;
  return delta->contains("content") && (*delta)["content"].is_string() &&
         !delta->contains("role") && !finishing;
}

void StreamRecorder::on_event(const SseEvent& event, double t_s) {
  if (event.data == "[DONE]") {
    if (done_s_ < 0) done_s_ = t_s;
    return;
  }
  auto j = nlohmann::json::parse(event.data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    if (error_.empty()) error_ = "unparseable stream chunk: " + event.data.substr(0, 200);
    return;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    if (error_.empty())
      error_ = "server error: " +
               (e->is_object() && e->contains("message") && (*e)["message"].is_string()
                    ? (*e)["message"].get<std::string>()
                    : e->dump());
    return;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    auto read = [&](const char* key, int32_t& out) {
      if (auto v = u->find(key); v != u->end() && v->is_number_integer()) out = v->get<int32_t>();
    };
    read("prompt_tokens", usage_prompt_);
    read("completion_tokens", usage_completion_);
  }
  auto choices = j.find("choices");
  if (choices != j.end() && choices->is_array() && !choices->empty() && (*choices)[0].is_object() &&
      is_content((*choices)[0]))
    chunk_s_.push_back(t_s);
}

RequestResult StreamRecorder::finish(const BenchRequest& request, const Status& transport,
                                     double end_s) const {
  RequestResult r;
  r.e2e_s = done_s_ >= 0 ? done_s_ : end_s;
  r.num_content_chunks = static_cast<int32_t>(chunk_s_.size());
  r.usage_reported = usage_completion_ >= 0;
  r.prompt_tokens = usage_prompt_ >= 0 ? usage_prompt_ : request.input_len;
  r.output_tokens = r.usage_reported ? usage_completion_ : r.num_content_chunks;
  if (!chunk_s_.empty()) r.ttft_s = chunk_s_.front();
  for (size_t i = 1; i < chunk_s_.size(); ++i) r.itl_s.push_back(chunk_s_[i] - chunk_s_[i - 1]);
  if (!transport.ok()) {
    r.error = transport.message();
  } else if (!error_.empty()) {
    r.error = error_;
  } else if (chunk_s_.empty()) {
    r.error = "the response streamed no tokens";
  } else if (done_s_ < 0) {
    r.error = "the stream ended without data: [DONE]";
  } else {
    r.success = true;
  }
  return r;
}

}  // namespace kite::bench
