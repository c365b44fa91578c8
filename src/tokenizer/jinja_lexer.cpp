#include "tokenizer/jinja_lexer.h"

#include <utility>

#include "tokenizer/jinja_text.h"

namespace kite::jinja {
namespace {

// Preprocessed template text plus, for every byte, its offset in the original source. All
// preprocessing steps only delete bytes, so the map is built by copying survivors.
struct MappedText {
  std::string text;
  std::vector<uint32_t> origin;

  // Drops the bytes whose `remove` flag is set.
  void erase_marked(const std::vector<bool>& remove) {
    std::string t;
    std::vector<uint32_t> o;
    t.reserve(text.size());
    o.reserve(origin.size());
    for (size_t i = 0; i < text.size(); ++i) {
      if (remove[i]) continue;
      t += text[i];
      o.push_back(origin[i]);
    }
    text = std::move(t);
    origin = std::move(o);
  }
};

bool is_line_terminator_at(std::string_view s, size_t i, size_t* len) {
  if (s[i] == '\n' || s[i] == '\r') {
    *len = 1;
    return true;
  }
  // U+2028 / U+2029 also start a new line for JS's multiline `^`.
  if (s.substr(i, 3) == "\xE2\x80\xA8" || s.substr(i, 3) == "\xE2\x80\xA9") {
    *len = 3;
    return true;
  }
  return false;
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1".
void lstrip_blocks(MappedText& m) {
  const std::string& s = m.text;
  std::vector<bool> remove(s.size(), false);
  size_t line_start = 0;
  while (line_start <= s.size()) {
    size_t j = line_start;
    while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
    if (j + 1 < s.size() && s[j] == '{' &&
        (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
      for (size_t k = line_start; k < j; ++k) remove[k] = true;
    }
    // Advance to the next line start.
    size_t k = line_start;
    size_t len = 0;
    while (k < s.size() && !is_line_terminator_at(s, k, &len)) ++k;
    if (k >= s.size()) break;
    line_start = k + len;
  }
  m.erase_marked(remove);
}

// trim_blocks: /([#%-]})\n/g -> "$1".
void trim_blocks(MappedText& m) {
  const std::string& s = m.text;
  std::vector<bool> remove(s.size(), false);
  for (size_t i = 0; i + 2 < s.size(); ++i) {
    if ((s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
      remove[i + 2] = true;
      i += 2;
    }
  }
  m.erase_marked(remove);
}

size_t skip_js_space(std::string_view s, size_t i) {
  while (size_t n = js_space_len_at(s, i)) i += n;
  return i;
}

// Matches `{%-? \s* (end)?generation \s* -?%}` at i; returns its end or 0.
size_t match_generation_tag(std::string_view s, size_t i, bool* lstrip, bool* rstrip) {
  if (s.substr(i, 2) != "{%") return 0;
  size_t j = i + 2;
  *lstrip = j < s.size() && s[j] == '-';
  if (*lstrip) ++j;
  j = skip_js_space(s, j);
  if (s.substr(j, 3) == "end") j += 3;
  if (s.substr(j, 10) != "generation") return 0;
  j = skip_js_space(s, j + 10);
  *rstrip = j < s.size() && s[j] == '-';
  if (*rstrip) ++j;
  if (s.substr(j, 2) != "%}") return 0;
  return j + 2;
}

// transformers' {% generation %} markers carry no output; remove them (and the whitespace
// around them when the tag asks for it), as @huggingface/jinja does.
void strip_generation_tags(MappedText& m) {
  const std::string& s = m.text;
  std::vector<bool> remove(s.size(), false);
  size_t ws_start = 0;  // start of the current whitespace run at or after cursor
  for (size_t i = 0; i < s.size();) {
    bool lstrip = false;
    bool rstrip = false;
    const size_t end = s[i] == '{' ? match_generation_tag(s, i, &lstrip, &rstrip) : 0;
    if (end != 0) {
      const size_t after_end = skip_js_space(s, end);
      for (size_t k = lstrip ? ws_start : i; k < end; ++k) remove[k] = true;
      if (rstrip) {
        for (size_t k = end; k < after_end; ++k) remove[k] = true;
      }
      i = ws_start = after_end;
      continue;
    }
    if (size_t n = js_space_len_at(s, i)) {
      i += n;
    } else {
      i += 1;
      ws_start = i;
    }
  }
  m.erase_marked(remove);
}

MappedText preprocess(std::string_view source) {
  MappedText m;
  m.text.assign(source);
  m.origin.resize(source.size());
  for (size_t i = 0; i < source.size(); ++i) m.origin[i] = static_cast<uint32_t>(i);
  if (!m.text.empty() && m.text.back() == '\n') {
    m.text.pop_back();
    m.origin.pop_back();
  }
  lstrip_blocks(m);
  trim_blocks(m);
  strip_generation_tags(m);
  return m;
}

struct Symbol {
  const char* text;
  TokenType type;
};
// Order matters: longer sequences before their prefixes, as in @huggingface/jinja.
constexpr Symbol kSymbols[] = {
    {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenBrace},       {"}", TokenType::kCloseBrace},
    {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
    {",", TokenType::kComma},           {".", TokenType::kDot},
    {":", TokenType::kColon},           {"|", TokenType::kPipe},
    {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
    {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
    {"<", TokenType::kComparison},      {">", TokenType::kComparison},
    {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
    {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
    {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
    {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
    {"=", TokenType::kEquals},
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view original, MappedText m)
      : original_(original), m_(std::move(m)), s_(m_.text) {}
  Result<std::vector<Token>> run();

 private:
  Status error(size_t at, const std::string& message) const {
    const uint32_t pos =
        at < m_.origin.size() ? m_.origin[at] : static_cast<uint32_t>(original_.size());
    return invalid_argument("template syntax error at " + describe_position(original_, pos) + ": " +
                            message);
  }
  void push(TokenType type, std::string value, size_t at) {
    const uint32_t pos =
        at < m_.origin.size() ? m_.origin[at] : static_cast<uint32_t>(original_.size());
    tokens_.push_back(Token{type, std::move(value), pos});
  }
  bool last_is(TokenType t) const { return !tokens_.empty() && tokens_.back().type == t; }
  void strip_trailing_whitespace() {
    if (!last_is(TokenType::kText)) return;
    Token& t = tokens_.back();
    t.value.resize(trim_end_js(t.value).size());
    if (t.value.empty()) tokens_.pop_back();
  }
  Status lex_comment();
  Status lex_string();
  Status lex_escape(std::string& out);
  void lex_number(std::string prefix, size_t start);

  std::string_view original_;
  MappedText m_;
  std::string_view s_;
  size_t i_ = 0;
  int brace_depth_ = 0;
  std::vector<Token> tokens_;
};

Status Lexer::lex_comment() {
  const size_t start = i_;
  i_ += 2;
  const bool strip_before = i_ < s_.size() && s_[i_] == '-';
  if (strip_before) ++i_;
  const size_t end = s_.find("#}", i_);
  if (end == std::string_view::npos) return error(start, "missing end of comment tag '#}'");
  std::string comment(s_.substr(i_, end - i_));
  const bool strip_after = !comment.empty() && comment.back() == '-';
  if (strip_after) comment.pop_back();
  if (strip_before) strip_trailing_whitespace();
  push(TokenType::kComment, std::move(comment), start);
  i_ = end + 2;
  if (strip_after) i_ = skip_js_space(s_, i_);
  return ok_status();
}

Status Lexer::lex_escape(std::string& out) {
  const size_t at = i_;
  if (++i_ >= s_.size()) return error(at, "unexpected end of input in string literal");
  const char c = s_[i_++];
  if (c == 'x' || c == 'u') {
    const size_t n = c == 'x' ? 2 : 4;
    char32_t cp = 0;
    for (size_t k = 0; k < n; ++k) {
      const int h = i_ + k < s_.size() ? hex_value(s_[i_ + k]) : -1;
      if (h < 0) return error(at, std::string("invalid hexadecimal escape sequence \\") + c);
      cp = cp * 16 + static_cast<char32_t>(h);
    }
    i_ += n;
    // A \uD83D\uDE00 pair is one code point, as in a JS string.
    if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(i_, 2) == "\\u" && i_ + 6 <= s_.size()) {
      char32_t lo = 0;
      bool ok = true;
      for (size_t k = 2; k < 6; ++k) {
        const int h = hex_value(s_[i_ + k]);
        ok = ok && h >= 0;
        lo = lo * 16 + static_cast<char32_t>(h < 0 ? 0 : h);
      }
      if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        i_ += 6;
      }
    }
    append_utf8(out, cp);
    return ok_status();
  }
  switch (c) {
    case 'n':
      out += '\n';
      break;
    case 't':
      out += '\t';
      break;
    case 'r':
      out += '\r';
      break;
    case 'b':
      out += '\b';
      break;
    case 'f':
      out += '\f';
      break;
    case 'v':
      out += '\v';
      break;
    case '\'':
      out += '\'';
      break;
    case '"':
      out += '"';
      break;
    case '\\':
      out += '\\';
      break;
    default:
      return error(at, std::string("unexpected escaped character '\\") + c + "'");
  }
  return ok_status();
}

Status Lexer::lex_string() {
  const size_t start = i_;
  const char quote = s_[i_++];
  std::string value;
  while (true) {
    if (i_ >= s_.size()) return error(start, "unterminated string literal");
    const char c = s_[i_];
    if (c == quote) break;
    if (c == '\\') {
      KITE_RETURN_IF_ERROR(lex_escape(value));
      continue;
    }
    value += c;
    ++i_;
  }
  ++i_;
  push(TokenType::kString, std::move(value), start);
  return ok_status();
}

void Lexer::lex_number(std::string prefix, size_t start) {
  std::string num = std::move(prefix);
  const size_t digits_start = i_;
  while (i_ < s_.size() && is_digit(s_[i_])) num += s_[i_++];
  // "x.0" after a dot is an index, never a fraction.
  const bool after_dot = last_is(TokenType::kDot);
  if (i_ > digits_start && !after_dot && i_ + 1 < s_.size() && s_[i_] == '.' &&
      is_digit(s_[i_ + 1])) {
    num += s_[i_++];
    while (i_ < s_.size() && is_digit(s_[i_])) num += s_[i_++];
  }
  push(TokenType::kNumber, std::move(num), start);
}

Result<std::vector<Token>> Lexer::run() {
  while (i_ < s_.size()) {
    const bool outside = tokens_.empty() || last_is(TokenType::kCloseStatement) ||
                         last_is(TokenType::kCloseExpression) || last_is(TokenType::kComment);
    if (outside) {
      const size_t start = i_;
      while (i_ < s_.size() && !(s_[i_] == '{' && i_ + 1 < s_.size() &&
                                 (s_[i_ + 1] == '%' || s_[i_ + 1] == '{' || s_[i_ + 1] == '#'))) {
        ++i_;
      }
      if (i_ > start) {
        push(TokenType::kText, std::string(s_.substr(start, i_ - start)), start);
        continue;
      }
    }
    if (s_.substr(i_, 2) == "{#") {
      KITE_RETURN_IF_ERROR(lex_comment());
      continue;
    }
    if (s_.substr(i_, 3) == "{%-" || s_.substr(i_, 3) == "{{-") {
      strip_trailing_whitespace();
      const bool stmt = s_[i_ + 1] == '%';
      push(stmt ? TokenType::kOpenStatement : TokenType::kOpenExpression, stmt ? "{%" : "{{", i_);
      if (!stmt) brace_depth_ = 0;
      i_ += 3;
      continue;
    }
    i_ = skip_js_space(s_, i_);
    if (i_ >= s_.size()) return error(i_, "unexpected end of input inside a tag");
    if (s_.substr(i_, 3) == "-%}" || s_.substr(i_, 3) == "-}}") {
      const bool stmt = s_[i_ + 1] == '%';
      push(stmt ? TokenType::kCloseStatement : TokenType::kCloseExpression, stmt ? "%}" : "}}", i_);
      i_ = skip_js_space(s_, i_ + 3);
      continue;
    }
    const char c = s_[i_];
    if (c == '-' || c == '+') {
      if (tokens_.empty() || last_is(TokenType::kText))
        return error(i_, std::string("unexpected character '") + c + "'");
      const TokenType last = tokens_.back().type;
      const bool binary = last == TokenType::kIdentifier || last == TokenType::kNumber ||
                          last == TokenType::kString || last == TokenType::kCloseParen ||
                          last == TokenType::kCloseBracket;
      if (!binary) {
        const size_t start = i_++;
        if (i_ < s_.size() && is_digit(s_[i_])) {
          lex_number(std::string(1, c), start);
        } else {
          push(TokenType::kUnary, std::string(1, c), start);
        }
        continue;
      }
    }
    bool matched = false;
    for (const Symbol& sym : kSymbols) {
      const std::string_view text(sym.text);
      if (sym.type == TokenType::kCloseExpression && brace_depth_ > 0) continue;
      if (s_.substr(i_, text.size()) != text) continue;
      push(sym.type, std::string(text), i_);
      if (sym.type == TokenType::kOpenExpression) brace_depth_ = 0;
      if (sym.type == TokenType::kOpenBrace) ++brace_depth_;
      if (sym.type == TokenType::kCloseBrace) --brace_depth_;
      i_ += text.size();
      matched = true;
      break;
    }
    if (matched) continue;
    if (c == '\'' || c == '"') {
      KITE_RETURN_IF_ERROR(lex_string());
    } else if (is_digit(c)) {
      lex_number("", i_);
    } else if (is_word(c)) {
      const size_t start = i_;
      while (i_ < s_.size() && is_word(s_[i_])) ++i_;
      push(TokenType::kIdentifier, std::string(s_.substr(start, i_ - start)), start);
    } else {
      size_t len = 0;
      decode_utf8(s_, i_, &len);
      return error(i_, "unexpected character '" + std::string(s_.substr(i_, len)) + "'");
    }
  }
  return std::move(tokens_);
}

}  // namespace

std::string describe_position(std::string_view source, uint32_t pos) {
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < pos && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  size_t column = 1;
  for (size_t i = line_start; i < pos && i < source.size();) {
    size_t len = 0;
    decode_utf8(source, i, &len);
    i += len;
    ++column;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

Result<std::vector<Token>> tokenize(std::string_view source) {
  if (source.size() > (1u << 30)) return invalid_argument("template larger than 1 GiB");
  Lexer lexer(source, preprocess(source));
  return lexer.run();
}

}  // namespace kite::jinja
