#include "tokenizer/jinja_text.h"

namespace kite::jinja {

char32_t decode_utf8(std::string_view s, size_t i, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) -> int {
    if (i + k >= s.size()) return -1;
    const auto b = static_cast<unsigned char>(s[i + k]);
    return (b & 0xC0) == 0x80 ? (b & 0x3F) : -1;
  };
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  int need = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    need = 1;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    need = 2;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    need = 3;
    cp = b0 & 0x07;
  } else {
    *len = 1;
    return b0;
  }
  for (int k = 1; k <= need; ++k) {
    const int c = cont(k);
    if (c < 0) {
      *len = 1;
      return b0;
    }
    cp = (cp << 6) | static_cast<char32_t>(c);
  }
  *len = static_cast<size_t>(need) + 1;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_js_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

size_t js_space_len_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t len = 0;
  const char32_t cp = decode_utf8(s, i, &len);
  return is_js_space(cp) ? len : 0;
}

std::string_view trim_start_js(std::string_view s) {
  size_t i = 0;
  while (size_t n = js_space_len_at(s, i)) i += n;
  return s.substr(i);
}

std::string_view trim_end_js(std::string_view s) {
  // Walk forward remembering where the trailing run of whitespace began: UTF-8 cannot be
  // decoded backwards without re-synchronising, and templates are short.
  size_t i = 0;
  size_t end = 0;
  while (i < s.size()) {
    size_t len = 0;
    const char32_t cp = decode_utf8(s, i, &len);
    i += len;
    if (!is_js_space(cp)) end = i;
  }
  return s.substr(0, end);
}

std::string_view trim_js(std::string_view s) { return trim_end_js(trim_start_js(s)); }

std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
  const std::vector<std::string> set = split_code_points(chars);
  auto starts_with_any = [&](std::string_view v) -> size_t {
    for (const auto& c : set) {
      if (v.substr(0, c.size()) == c) return c.size();
    }
    return 0;
  };
  auto ends_with_any = [&](std::string_view v) -> size_t {
    for (const auto& c : set) {
      if (v.size() >= c.size() && v.substr(v.size() - c.size()) == c) return c.size();
    }
    return 0;
  };
  if (left) {
    while (size_t n = starts_with_any(s)) s.remove_prefix(n);
  }
  if (right) {
    while (size_t n = ends_with_any(s)) s.remove_suffix(n);
  }
  return s;
}

size_t utf16_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const char32_t cp = decode_utf8(s, i, &len);
    i += len;
    n += cp >= 0x10000 ? 2 : 1;
  }
  return n;
}

std::vector<std::string> split_code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    decode_utf8(s, i, &len);
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace kite::jinja
