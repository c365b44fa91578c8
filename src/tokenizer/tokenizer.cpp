#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace kite {

void Tokenizer::Impl::encode_pre_tokens(std::string_view text, std::vector<int32_t>* ids) const {
  pre_tokenizer.for_each_piece(
      text, [this, ids](std::string_view piece) { bpe.encode_piece(piece, ids); });
}

void Tokenizer::Impl::encode_normalized(std::string_view text, std::vector<int32_t>* ids) const {
  std::string normalized;
  if (nfc && !unicode::is_nfc_quick(text)) {
    normalized = unicode::to_nfc(text);
    text = normalized;
  }
  if (normalized_matcher.empty()) {
    encode_pre_tokens(text, ids);
    return;
  }
  size_t pos = 0;
  for (const AddedTokenMatcher::Match& m : normalized_matcher.find_all(text)) {
    if (m.start > pos) encode_pre_tokens(text.substr(pos, m.start - pos), ids);
    ids->push_back(m.id);
    pos = m.end;
  }
  if (pos < text.size()) encode_pre_tokens(text.substr(pos), ids);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& im = *impl_;
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::to_valid_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids = im.template_prefix;
  size_t pos = 0;
  for (const AddedTokenMatcher::Match& m : im.raw_matcher.find_all(text)) {
    if (m.start > pos) im.encode_normalized(text.substr(pos, m.start - pos), &ids);
    ids.push_back(m.id);
    pos = m.end;
  }
  if (pos < text.size()) im.encode_normalized(text.substr(pos), &ids);
  if (add_special_tokens)
    ids.insert(ids.end(), im.template_suffix.begin(), im.template_suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= im.id_flags.size()) continue;
    uint8_t flags = im.id_flags[id];
    if (!(flags & Impl::kPresent)) continue;
    if (skip_special_tokens && (flags & Impl::kSpecial)) continue;
    bytes += im.id_bytes[id];
  }
  return utf8::to_valid_lossy(bytes);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->bpe.token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_flags.size()) return std::nullopt;
  if (!(impl_->id_flags[id] & Impl::kPresent)) return std::nullopt;
  return impl_->id_spelling[id];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_bytes.size()) return {};
  return impl_->id_bytes[id];
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_flags.size()); }

bool Tokenizer::is_special(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_flags.size()) return false;
  return (impl_->id_flags[id] & Impl::kSpecial) != 0;
}

bool Tokenizer::clean_up_tokenization_spaces() const { return impl_->clean_up_tokenization_spaces; }

std::string clean_up_tokenization(std::string text) {
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) {
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = text.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
      out.append(text, pos, hit - pos);
      out.append(to);
    }
    if (pos == 0) continue;
    out.append(text, pos);
    text = std::move(out);
  }
  return text;
}

}  // namespace kite
