#include "tokenizer/prompt_renderer.h"

#include <fstream>

namespace kite {

Result<PromptRenderer> PromptRenderer::create(const Tokenizer& tokenizer,
                                              const std::string& model_dir) {
  std::ifstream f(model_dir + "/tokenizer_config.json");
  if (!f) return PromptRenderer(tokenizer, std::nullopt);
  auto config = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return corrupt(model_dir + "/tokenizer_config.json is not valid JSON");
  if (!config.contains("chat_template")) return PromptRenderer(tokenizer, std::nullopt);
  auto t = ChatTemplate::from_tokenizer_config(config);
  if (!t.ok()) return t.status().with_context(model_dir + "/tokenizer_config.json chat_template");
  return PromptRenderer(tokenizer, std::move(*t));
}

Result<std::string> PromptRenderer::render_chat(const nlohmann::ordered_json& messages,
                                                bool add_generation_prompt,
                                                const nlohmann::ordered_json& extra) const {
  if (!template_)
    return invalid_argument("this model has no chat template (tokenizer_config.json)");
  nlohmann::ordered_json ctx = extra.is_object() ? extra : nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  return template_->render(ctx);
}

Result<std::vector<int32_t>> PromptRenderer::encode_chat(
    const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra) const {
  KITE_ASSIGN_OR_RETURN(std::string text, render_chat(messages, true, extra));
  return tokenizer_.encode(text, false);
}

}  // namespace kite
