// Hugging Face chat templates: turns a conversation into the prompt text a model expects.
//
// A chat template is a Jinja2 program stored in tokenizer_config.json ("chat_template").
// kite renders it with its own small Jinja interpreter (tokenizer/jinja_*), checked byte for
// byte against @huggingface/jinja — the renderer of transformers.js — on the templates of
// DeepSeek-V3, Llama-3.1, Qwen2.5 and Qwen3 (goldens in tools/fixtures/chat_template/).
//
//   KITE_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::from_tokenizer_config(config));
//   nlohmann::ordered_json ctx = {{"messages", messages}, {"add_generation_prompt", true}};
//   KITE_ASSIGN_OR_RETURN(std::string prompt, t.render(ctx));
//
// A ChatTemplate is immutable after construction and cheap to copy (the parsed program is
// shared); render() may be called from several threads at once.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"
#include "tokenizer/jinja_interpreter.h"

namespace kite {

namespace jinja {
struct Program;
}

class ChatTemplate {
 public:
  // Parses template source. Syntax errors name the line and column.
  static Result<ChatTemplate> parse(std::string source);

  // Reads tokenizer_config.json: "chat_template" is a string, or a list of
  // {"name": ..., "template": ...} (or a {name: template} object) from which
  // `template_name` is picked; "bos_token"/"eos_token" are strings or {"content": ...}.
  static Result<ChatTemplate> from_tokenizer_config(const nlohmann::json& config,
                                                    const std::string& template_name = "default");

  // Renders with `context` (a JSON object) as the template's variables: usually messages,
  // add_generation_prompt, tools, plus any extra kwargs (enable_thinking, ...). bos_token
  // and eos_token from the tokenizer config are added unless the context sets them.
  // Use ordered_json so tool schemas keep the key order the client sent (tojson prints
  // keys in order, and the model saw them in that order); nlohmann::json sorts keys.
  // Errors: raise_exception() in the template, type errors, unknown filters, limits.
  Result<std::string> render(const nlohmann::ordered_json& context) const;
  Result<std::string> render(const nlohmann::json& context) const;

  const std::string& source() const;
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }

  // Bounds on one render (output size, loop iterations, macro depth).
  void set_limits(const jinja::RenderLimits& limits) { limits_ = limits; }

 private:
  ChatTemplate() = default;  // only through parse()/from_tokenizer_config(): program_ is never null
  Result<std::string> render_value(const jinja::Value& context) const;

  std::shared_ptr<const jinja::Program> program_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
  jinja::RenderLimits limits_;
};

}  // namespace kite
