// libFuzzer target: the chat-template renderer (tokenizer/chat_template.h, kite's Jinja
// interpreter). The first byte picks the mode:
//   even: the rest is a chat template's source, rendered with a fixed conversation;
//   odd:  the rest is a JSON request's "messages" value (any JSON), rendered with the shipped
//         kite-tiny template as the server would.
// Render limits (loop iterations, depth, output size) must stop every runaway template with
// an error rather than a hang, a stack overflow or an out-of-memory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/chat_template.h"

namespace {

using OJson = nlohmann::ordered_json;

const kite::ChatTemplate& kite_tiny_template() {
  static const kite::ChatTemplate* t = [] {
    std::ifstream in(KITE_SOURCE_DIR "/models/kite-tiny/tokenizer_config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = kite::ChatTemplate::from_tokenizer_config(nlohmann::json::parse(ss.str()));
    if (!r.ok()) std::abort();
    return new kite::ChatTemplate(std::move(*r));
  }();
  return *t;
}

const OJson& fixed_context() {
  static const OJson* c = new OJson(OJson::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "What is a kernel?"},
                 {"role": "assistant", "content": "A core."},
                 {"role": "user", "content": "More \u00e9 \ud83d\ude00 <|x|>"}],
    "add_generation_prompt": true, "tools": [{"type": "function",
      "function": {"name": "f", "parameters": {"type": "object"}}}]})"));
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) == 0) {
    auto t = kite::ChatTemplate::parse(rest);
    if (!t.ok()) return 0;
    (void)t->render(fixed_context());
    return 0;
  }
  OJson messages = OJson::parse(rest, nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded()) return 0;
  OJson ctx = {{"messages", std::move(messages)}, {"add_generation_prompt", true}};
  (void)kite_tiny_template().render(ctx);
  return 0;
}
