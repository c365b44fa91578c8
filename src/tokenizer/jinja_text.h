// UTF-8 text helpers for the Jinja interpreter.
//
// Templates are rendered for byte-identical agreement with @huggingface/jinja (the renderer
// transformers.js uses), which runs on JavaScript strings. These helpers reproduce the JS
// notions the templates can observe: what counts as whitespace for trim()/\s (ASCII spaces
// plus the Unicode space separators, U+FEFF and the line separators) and length in UTF-16
// code units. Strings stay UTF-8 everywhere; nothing here allocates more than its result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kite::jinja {

// Decodes the code point at s[i]; sets `len` to its byte length. Invalid bytes decode as
// themselves (len 1) so malformed input never loops or reads past the end.
char32_t decode_utf8(std::string_view s, size_t i, size_t* len);
void append_utf8(std::string& out, char32_t cp);

// JS whitespace: the set String.prototype.trim() and the regex class \s remove.
bool is_js_space(char32_t cp);
// Byte length of the JS whitespace character starting at s[i], or 0 when there is none.
size_t js_space_len_at(std::string_view s, size_t i);

std::string_view trim_js(std::string_view s);
std::string_view trim_start_js(std::string_view s);
std::string_view trim_end_js(std::string_view s);

// Python str.strip(chars) / lstrip / rstrip with an explicit set of characters.
std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right);

// Length as JavaScript reports it (UTF-16 code units): what `|length` returns for strings.
size_t utf16_length(std::string_view s);
// Splits into code points (each a UTF-8 string), as JS Array.from(str) does.
std::vector<std::string> split_code_points(std::string_view s);

std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);

}  // namespace kite::jinja
