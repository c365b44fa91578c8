// Jinja lexer: template source -> tokens.
//
// Whitespace handling follows @huggingface/jinja (and so transformers.js) exactly:
//  - one trailing newline of the template is dropped;
//  - lstrip_blocks: spaces/tabs between a line start and `{%` / `{#` are removed;
//  - trim_blocks: the newline right after `%}` / `#}` is removed;
//  - `{%-`, `{{-`, `{#-` strip whitespace before the tag, `-%}`, `-}}`, `-#}` after it;
//  - transformers' `{% generation %}` / `{% endgeneration %}` tags are removed.
// Every token records its byte offset in the ORIGINAL source, so errors name a line/column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kite::jinja {

enum class TokenType {
  kText,
  kNumber,      // value holds the literal, with a leading '-' or '+' when it was unary
  kString,      // value holds the unescaped contents
  kIdentifier,  // names and keywords alike (if, in, not, true, ...)
  kEquals,      // =
  kOpenParen,
  kCloseParen,
  kOpenStatement,    // {%
  kCloseStatement,   // %}
  kOpenExpression,   // {{
  kCloseExpression,  // }}
  kOpenBracket,
  kCloseBracket,
  kOpenBrace,
  kCloseBrace,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // a sign that is not followed by a number
  kComment,
};

struct Token {
  TokenType type;
  std::string value;
  uint32_t pos;  // byte offset in the original source
};

// "line L, column C" (both 1-based, column in code points) for a byte offset of `source`.
std::string describe_position(std::string_view source, uint32_t pos);

Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace kite::jinja
