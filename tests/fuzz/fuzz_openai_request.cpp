// libFuzzer target: the OpenAI request parser and parameter validation
// (server/openai_request.h) on arbitrary bytes. The first byte picks the endpoint; the rest is
// the body. Invariant checked beyond "no crash / no sanitizer report": an accepted request
// respects every limit the parser promises, and an error names a status of 400.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/openai_request.h"

using kite::server::ApiKind;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ApiKind kind = (data[0] & 1) ? ApiKind::kChat : ApiKind::kCompletion;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  kite::server::RequestLimits limits;
  kite::server::GenerationRequest req;
  if (auto err = kite::server::parse_generation_request(kind, body, &req, limits)) {
    if (err->status != 400 || err->message.empty()) std::abort();
    (void)err->to_json();
    return 0;
  }
  const size_t prompts = kind == ApiKind::kChat ? 1 : req.prompts.size();
  if (prompts == 0 || req.n < 1 ||
      static_cast<int64_t>(req.n) * static_cast<int64_t>(prompts) > limits.max_choices)
    std::abort();
  if (kind == ApiKind::kChat && (!req.messages.is_array() || req.messages.empty() ||
                                 req.messages.size() > limits.max_messages))
    std::abort();
  if (req.sampling.stop.size() > limits.max_stop_strings) std::abort();
  if (!req.sampling.validate().ok()) std::abort();
  return 0;
}
