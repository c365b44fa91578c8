// Jinja syntax tree.
//
// One generic node type keeps the parser and evaluator short: `kind` says which fields are
// meaningful (listed per kind below). A template body is a list of nodes; evaluating it
// prints every expression's value and every text node, while statements (set, macro,
// comment) print nothing. Nodes are immutable after parsing, so one parsed template may be
// rendered from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace kite::jinja {

enum class NodeKind {
  // Statements.
  kIf,   // a: test, body, alternate (else / elif chain)
  kFor,  // a: loop target (identifier or tuple), b: iterable (may be kSelect),
         // body, alternate: the `else` block run when nothing was iterated
  kBreak,
  kContinue,
  kSet,          // a: target (identifier, tuple or ns.attr), b: value (null => body block)
  kMacro,        // name, items: parameters (kIdentifier or kKeywordArg), body
  kCallBlock,    // a: kCall to invoke, items: caller parameters, body: the caller() body
  kFilterBlock,  // a: filter (kIdentifier or kCall), body
  kComment,
  // Expressions.
  kLiteral,        // literal: int, float or string (text between tags is a string literal)
  kArray,          // items
  kTuple,          // items
  kDict,           // items: key0, value0, key1, value1, ...
  kIdentifier,     // name
  kMember,         // a: object, b: property; flag: computed (`x[...]` rather than `x.name`)
  kSlice,          // a: start, b: stop, c: step (each may be null)
  kCall,           // a: callee, items: arguments (expressions, kKeywordArg, kSpread...)
  kKeywordArg,     // name, a: value
  kSpread,         // a: value (`*args`)
  kKeywordSpread,  // a: value (`**kwargs`)
  kUnary,          // name: "not", "-" or "+"; a: operand
  kBinary,         // name: operator; a, b
  kFilter,         // a: operand, b: filter (kIdentifier or kCall)
  kTest,           // a: operand, name: test, flag: negated, items: test arguments
  kSelect,         // a: value, b: condition (`a if b` with no else: undefined when false)
  kTernary,        // a: condition, b: value if true, c: value if false
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  uint32_t pos = 0;  // byte offset in the template source, for error messages
  std::string name;
  Value literal;
  bool flag = false;
  NodePtr a, b, c;
  std::vector<NodePtr> items;
  std::vector<NodePtr> body;
  std::vector<NodePtr> alternate;

  Node(NodeKind k, uint32_t p) : kind(k), pos(p) {}
};

struct Program {
  std::string source;  // kept to turn node offsets into line/column in runtime errors
  std::vector<NodePtr> body;
};

}  // namespace kite::jinja
