// PromptRenderer: turns what a user sends (plain text, or chat messages) into prompt token
// ids, the way transformers does: plain text is encoded with the tokenizer's special tokens
// (BOS); chat messages are rendered by the model's chat template and encoded without adding
// special tokens again (the template writes BOS itself).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kite {

class PromptRenderer {
 public:
  // Reads tokenizer_config.json of `model_dir` for the chat template (optional).
  static Result<PromptRenderer> create(const Tokenizer& tokenizer, const std::string& model_dir);

  std::vector<int32_t> encode_text(const std::string& text) const {
    return tokenizer_.encode(text, true);
  }
  // messages: [{"role": ..., "content": ...}, ...]; extra: more template variables (tools...).
  Result<std::string> render_chat(
      const nlohmann::ordered_json& messages, bool add_generation_prompt,
      const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
  Result<std::vector<int32_t>> encode_chat(
      const nlohmann::ordered_json& messages,
      const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
  bool has_chat_template() const { return template_.has_value(); }

 private:
  PromptRenderer(Tokenizer tokenizer, std::optional<ChatTemplate> t)
      : tokenizer_(std::move(tokenizer)), template_(std::move(t)) {}
  Tokenizer tokenizer_;
  std::optional<ChatTemplate> template_;
};

}  // namespace kite
