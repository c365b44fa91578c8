#include "tokenizer/chat_template.h"

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_parser.h"

namespace kite {

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  KITE_ASSIGN_OR_RETURN(auto program, jinja::parse_template(std::move(source)));
  ChatTemplate t;
  t.program_ = std::move(program);
  return t;
}

// A special token in tokenizer_config.json is a plain string or an AddedToken object.
static Result<std::optional<std::string>> special_token(const nlohmann::json& config,
                                                        const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string())
      return std::optional<std::string>(content->get<std::string>());
  }
  return invalid_argument(std::string("tokenizer_config.json: '") + key +
                          "' must be a string or an object with a string 'content'");
}

static Result<std::string> pick_template(const nlohmann::json& field, const std::string& name) {
  if (field.is_string()) return field.get<std::string>();
  std::string names;
  if (field.is_array()) {
    for (const auto& entry : field) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
      if (!entry["name"].is_string() || !entry["template"].is_string()) continue;
      if (entry["name"] == name) return entry["template"].get<std::string>();
      names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
    }
  } else if (field.is_object()) {
    for (auto it = field.begin(); it != field.end(); ++it) {
      if (it.key() == name && it->is_string()) return it->get<std::string>();
      names += (names.empty() ? "" : ", ") + it.key();
    }
  } else {
    return invalid_argument(
        "tokenizer_config.json: 'chat_template' must be a string or a list of named templates");
  }
  return not_found("tokenizer_config.json has no chat template named '" + name +
                   "' (it has: " + names + ")");
}

Result<ChatTemplate> ChatTemplate::from_tokenizer_config(const nlohmann::json& config,
                                                         const std::string& template_name) {
  if (!config.is_object()) return invalid_argument("tokenizer_config.json must hold a JSON object");
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return not_found(
        "tokenizer_config.json has no 'chat_template' (newer checkpoints keep it in "
        "chat_template.jinja: load that file with ChatTemplate::parse)");
  }
  KITE_ASSIGN_OR_RETURN(std::string source, pick_template(*it, template_name));
  auto parsed = parse(std::move(source));
  if (!parsed.ok()) return parsed.status().with_context("chat template '" + template_name + "'");
  ChatTemplate t = std::move(parsed).value();
  KITE_ASSIGN_OR_RETURN(t.bos_token_, special_token(config, "bos_token"));
  KITE_ASSIGN_OR_RETURN(t.eos_token_, special_token(config, "eos_token"));
  return t;
}

const std::string& ChatTemplate::source() const { return program_->source; }

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) return invalid_argument("chat template context must be a JSON object");
  KITE_ASSIGN_OR_RETURN(jinja::Value value, jinja::from_json(context));
  return render_value(value);
}

Result<std::string> ChatTemplate::render(const nlohmann::json& context) const {
  if (!context.is_object()) return invalid_argument("chat template context must be a JSON object");
  KITE_ASSIGN_OR_RETURN(jinja::Value value, jinja::from_json(context));
  return render_value(value);
}

Result<std::string> ChatTemplate::render_value(const jinja::Value& context) const {
  jinja::Env globals(nullptr);
  jinja::install_globals(globals);
  if (bos_token_ && context.find("bos_token") == nullptr)
    globals.set("bos_token", jinja::Value::string(*bos_token_));
  if (eos_token_ && context.find("eos_token") == nullptr)
    globals.set("eos_token", jinja::Value::string(*eos_token_));
  for (const auto& [key, value] : context.as_object()) globals.set(key, value);
  jinja::Interpreter interpreter(*program_, limits_);
  return interpreter.render(globals);
}

}  // namespace kite
