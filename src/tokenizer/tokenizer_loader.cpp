// Builds a Tokenizer::Impl from tokenizer.json and tokenizer_config.json. Every component these
// files may declare is either implemented exactly or rejected with kUnsupported naming it, so a
// tokenizer that loads is one kite encodes like HF.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode_nfc.h"

namespace kite {
namespace {

using nlohmann::json;

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<json> parse_json(std::string_view text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(source + " is not valid JSON");
  return j;
}

// The normalizer: NFC, or an empty/NFC-only Sequence. Returns whether NFC applies.
Result<bool> parse_normalizer(const json& n) {
  if (n.is_null()) return false;
  std::string type = n.value("type", "");
  if (type == "NFC") return true;
  if (type == "Sequence") {
    bool nfc = false;
    for (const json& child : n.value("normalizers", json::array())) {
      KITE_ASSIGN_OR_RETURN(bool child_nfc, parse_normalizer(child));
      nfc = nfc || child_nfc;
    }
    return nfc;
  }
  return unsupported("normalizer type '" + type + "'");
}

Status parse_added_tokens(const json& list, Tokenizer::Impl* im) {
  for (const json& t : list) {
    if (!t.contains("id") || !t.contains("content")) {
      return corrupt("added_tokens entry without id/content: " + t.dump().substr(0, 200));
    }
    if (t.value("single_word", false)) {
      return unsupported("added token '" + t["content"].get<std::string>() + "' has single_word");
    }
    AddedToken tok;
    tok.id = t["id"].get<int32_t>();
    tok.content = t["content"].get<std::string>();
    tok.special = t.value("special", false);
    tok.lstrip = t.value("lstrip", false);
    tok.rstrip = t.value("rstrip", false);
    tok.normalized = t.value("normalized", !tok.special);
    if (tok.id < 0) return corrupt("added token '" + tok.content + "' has a negative id");
    im->added_by_content[tok.content] = tok.id;
    im->added_tokens.push_back(std::move(tok));
  }
  std::vector<AddedToken> raw, normalized;
  for (const AddedToken& tok : im->added_tokens) {
    if (!tok.normalized) {
      raw.push_back(tok);
      continue;
    }
    AddedToken n = tok;
    if (im->nfc) n.content = unicode::to_nfc(n.content);
    normalized.push_back(std::move(n));
  }
  im->raw_matcher = AddedTokenMatcher(raw);
  im->normalized_matcher = AddedTokenMatcher(normalized);
  return ok_status();
}

// TemplateProcessing's "single" template, split around its $A sequence.
Status parse_template(const json& pp, Tokenizer::Impl* im) {
  const json& specials = pp.value("special_tokens", json::object());
  bool seen_sequence = false;
  for (const json& item : pp.value("single", json::array())) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken")) return corrupt("TemplateProcessing item " + item.dump());
    std::string name = item["SpecialToken"].value("id", "");
    if (!specials.contains(name)) {
      return corrupt("TemplateProcessing uses special token '" + name + "' it does not define");
    }
    auto& dst = seen_sequence ? im->template_suffix : im->template_prefix;
    for (const json& id : specials[name].value("ids", json::array())) {
      dst.push_back(id.get<int32_t>());
    }
  }
  return ok_status();
}

Status parse_post_processor(const json& pp, Tokenizer::Impl* im) {
  if (pp.is_null()) return ok_status();
  std::string type = pp.value("type", "");
  if (type == "ByteLevel") return ok_status();  // only adjusts offsets
  if (type == "TemplateProcessing") return parse_template(pp, im);
  if (type == "Sequence") {
    for (const json& child : pp.value("processors", json::array())) {
      KITE_RETURN_IF_ERROR(parse_post_processor(child, im));
    }
    return ok_status();
  }
  return unsupported("post_processor type '" + type + "'");
}

Status check_decoder(const json& d) {
  std::string type = d.is_null() ? "null" : d.value("type", "");
  if (type == "ByteLevel") return ok_status();
  return unsupported("decoder type '" + type + "' (kite implements the ByteLevel decoder)");
}

// Fills the per-id tables decode() and id_to_token() read.
void build_id_tables(Tokenizer::Impl* im) {
  const std::vector<std::string>& vocab = im->bpe.id_to_token();
  size_t size = vocab.size();
  for (const AddedToken& t : im->added_tokens) size = std::max(size, static_cast<size_t>(t.id) + 1);
  im->id_spelling.assign(size, "");
  im->id_bytes.assign(size, "");
  im->id_flags.assign(size, 0);
  auto set = [im](int32_t id, const std::string& spelling, uint8_t flags) {
    im->id_spelling[id] = spelling;
    // HF's ByteLevel decoder maps a token through the byte alphabet when every character is in
    // it, and otherwise emits the token's own UTF-8 (added tokens such as "<|im_start|>").
    std::optional<std::string> bytes = byte_level::decode(spelling);
    im->id_bytes[id] = bytes ? *bytes : spelling;
    im->id_flags[id] = flags;
  };
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (!vocab[id].empty()) set(static_cast<int32_t>(id), vocab[id], Tokenizer::Impl::kPresent);
  }
  for (const AddedToken& t : im->added_tokens) {  // added tokens win, as in HF's id_to_token
    set(t.id, t.content,
        Tokenizer::Impl::kPresent | (t.special ? Tokenizer::Impl::kSpecial : uint8_t{0}));
  }
}

// A token named in tokenizer_config.json: a string, an AddedToken object, or null.
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return std::nullopt;
}

Status apply_config(const json& config, Tokenizer* tok, Tokenizer::Impl* im) {
  std::optional<std::string> bos = config_token(config, "bos_token");
  std::optional<std::string> eos = config_token(config, "eos_token");
  if (bos) im->bos_id = tok->token_to_id(*bos);
  if (eos) im->eos_id = tok->token_to_id(*eos);
  im->clean_up_tokenization_spaces = config.value("clean_up_tokenization_spaces", true);
  std::string cls = config.value("tokenizer_class", "");
  if (cls == "LlamaTokenizerFast" || cls == "LlamaTokenizer") {
    // transformers' LlamaTokenizerFast.update_post_processor replaces the tokenizer.json
    // post-processor with "[BOS] $A [EOS]" per add_bos_token / add_eos_token.
    im->template_prefix.clear();
    im->template_suffix.clear();
    if (config.value("add_bos_token", true)) {
      if (!im->bos_id) return corrupt("add_bos_token is set but bos_token is not in the vocab");
      im->template_prefix.push_back(*im->bos_id);
    }
    if (config.value("add_eos_token", false)) {
      if (!im->eos_id) return corrupt("add_eos_token is set but eos_token is not in the vocab");
      im->template_suffix.push_back(*im->eos_id);
    }
  }
  return ok_status();
}

}  // namespace

Result<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json,
                                       std::string_view config_json, const std::string& source) {
  KITE_ASSIGN_OR_RETURN(json tj, parse_json(tokenizer_json, source));
  auto im = std::make_shared<Impl>();
  auto fail = [&source](const Status& s) { return s.with_context(source); };
  Result<bool> nfc = parse_normalizer(tj.value("normalizer", json()));
  if (!nfc.ok()) return fail(nfc.status());
  im->nfc = *nfc;
  Result<PreTokenizer> pt = PreTokenizer::from_json(tj.value("pre_tokenizer", json()));
  if (!pt.ok()) return fail(pt.status());
  im->pre_tokenizer = std::move(pt).value();
  Result<BpeModel> bpe = BpeModel::from_json(tj.value("model", json()));
  if (!bpe.ok()) return fail(bpe.status());
  im->bpe = std::move(bpe).value();
  for (Status s : {parse_added_tokens(tj.value("added_tokens", json::array()), im.get()),
                   parse_post_processor(tj.value("post_processor", json()), im.get()),
                   check_decoder(tj.value("decoder", json()))}) {
    if (!s.ok()) return fail(s);
  }
  build_id_tables(im.get());
  Tokenizer tok(im);
  if (!config_json.empty()) {
    KITE_ASSIGN_OR_RETURN(json cj, parse_json(config_json, "tokenizer_config.json"));
    Status s = apply_config(cj, &tok, im.get());
    if (!s.ok()) return s.with_context("tokenizer_config.json");
  }
  return tok;
}

Result<Tokenizer> Tokenizer::from_file(const std::string& tokenizer_json_path) {
  KITE_ASSIGN_OR_RETURN(std::string text, read_file(tokenizer_json_path));
  std::filesystem::path config_path =
      std::filesystem::path(tokenizer_json_path).parent_path() / "tokenizer_config.json";
  std::string config;
  if (std::filesystem::exists(config_path)) {
    KITE_ASSIGN_OR_RETURN(config, read_file(config_path.string()));
  }
  return from_json(text, config, tokenizer_json_path);
}

Result<Tokenizer> Tokenizer::from_dir(const std::string& model_dir) {
  std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer.json";
  if (!std::filesystem::exists(path)) {
    return not_found("no tokenizer.json in '" + model_dir +
                     "' (kite needs the Hugging Face fast-tokenizer file next to the model)");
  }
  return from_file(path.string());
}

}  // namespace kite
