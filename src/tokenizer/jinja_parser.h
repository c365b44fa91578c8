// Jinja parser: tokens -> syntax tree.
//
// Grammar and operator precedence follow @huggingface/jinja, from loosest to tightest:
//   `a if b else c` | or | and | not | comparisons, in, not in | + - ~ | * / // % | ** |
//   `is` tests | `|` filters | unary sign | calls, `.attr`, `[index]`, `[a:b:c]` | atoms.
// Statements: set (incl. `set a, b = ...`, `set ns.x = ...`, block set), if/elif/else,
// for (tuple targets, `if` filter, else), break, continue, macro, call, filter blocks.
// Nesting deeper than kMaxNestingDepth is a syntax error, so hostile templates cannot
// overflow the stack.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "tokenizer/jinja_ast.h"

namespace kite::jinja {

inline constexpr int kMaxNestingDepth = 256;

Result<std::shared_ptr<const Program>> parse_template(std::string source);

}  // namespace kite::jinja
