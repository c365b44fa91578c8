#include "tokenizer/jinja_parser.h"

#include <charconv>
#include <initializer_list>
#include <set>
#include <string_view>
#include <utility>

#include "tokenizer/jinja_lexer.h"

namespace kite::jinja {
namespace {

using T = TokenType;

class Parser {
 public:
  Parser(const std::string& source, std::vector<Token> tokens)
      : source_(source), tokens_(std::move(tokens)) {}

  Status parse_program(std::vector<NodePtr>& out) {
    while (cur_ < tokens_.size()) {
      KITE_ASSIGN_OR_RETURN(NodePtr node, parse_any());
      out.push_back(std::move(node));
    }
    return ok_status();
  }

 private:
  // Counts nesting on entry to every recursive rule; the destructor gives the level back.
  struct DepthGuard {
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
    int& depth;
  };
  // A loop that builds a left-deep chain (a + b + c ..., x.y.z, f|g|h) deepens the tree
  // without recursing here; each link counts as one level so evaluation depth stays bounded.
  struct ChainGuard {
    explicit ChainGuard(Parser& p) : parser(p), saved(p.depth_) {}
    ~ChainGuard() { parser.depth_ = saved; }
    Status link() {
      ++parser.depth_;
      return parser.check_depth();
    }
    Parser& parser;
    int saved;
  };

  Status error_at(uint32_t pos, const std::string& message) const {
    return invalid_argument("template syntax error at " + describe_position(source_, pos) + ": " +
                            message);
  }
  Status error(const std::string& message) const {
    const uint32_t pos =
        cur_ < tokens_.size() ? tokens_[cur_].pos : static_cast<uint32_t>(source_.size());
    return error_at(pos, message);
  }
  uint32_t pos() const {
    return cur_ < tokens_.size() ? tokens_[cur_].pos : static_cast<uint32_t>(source_.size());
  }
  bool is(T type, size_t ahead = 0) const {
    return cur_ + ahead < tokens_.size() && tokens_[cur_ + ahead].type == type;
  }
  bool is_identifier(std::string_view name, size_t ahead = 0) const {
    return is(T::kIdentifier, ahead) && tokens_[cur_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(T::kOpenStatement) || !is(T::kIdentifier, 1)) return false;
    for (auto n : names) {
      if (tokens_[cur_ + 1].value == n) return true;
    }
    return false;
  }
  Status expect(T type, const char* what) {
    if (!is(type)) {
      return error(std::string("expected ") + what +
                   (cur_ < tokens_.size() ? ", got '" + tokens_[cur_].value + "'"
                                          : ", got end of template"));
    }
    ++cur_;
    return ok_status();
  }
  Status expect_identifier(std::string_view name) {
    if (!is_identifier(name)) return error("expected '" + std::string(name) + "'");
    ++cur_;
    return ok_status();
  }
  Status check_depth() const {
    return depth_ > kMaxNestingDepth
               ? error("template nests deeper than " + std::to_string(kMaxNestingDepth) + " levels")
               : ok_status();
  }
  static NodePtr make(NodeKind kind, uint32_t pos) { return std::make_unique<Node>(kind, pos); }

  // Parses nodes into `out` until one of `names` opens the next statement.
  Status parse_until(std::initializer_list<std::string_view> names, std::vector<NodePtr>& out,
                     uint32_t opener, std::string_view opener_name) {
    while (!is_statement(names)) {
      if (cur_ >= tokens_.size()) {
        return error_at(opener, "'{% " + std::string(opener_name) +
                                    " %}' is never closed (missing '{% " +
                                    std::string(*names.begin()) + " %}')");
      }
      KITE_ASSIGN_OR_RETURN(NodePtr node, parse_any());
      out.push_back(std::move(node));
    }
    return ok_status();
  }
  Status expect_end(std::string_view name) {
    KITE_RETURN_IF_ERROR(expect(T::kOpenStatement, "'{%'"));
    KITE_RETURN_IF_ERROR(expect_identifier(name));
    return expect(T::kCloseStatement, "'%}'");
  }

  Result<NodePtr> parse_any();
  Result<NodePtr> parse_statement();
  Result<NodePtr> parse_set(uint32_t at);
  Result<NodePtr> parse_if(uint32_t at);
  Result<NodePtr> parse_for(uint32_t at);
  Result<NodePtr> parse_macro(uint32_t at);
  Result<NodePtr> parse_call_block(uint32_t at);
  Result<NodePtr> parse_filter_block(uint32_t at);
  Result<NodePtr> parse_sequence(bool primary);
  Result<NodePtr> parse_expression();
  Result<NodePtr> parse_or();
  Result<NodePtr> parse_and();
  Result<NodePtr> parse_not();
  Result<NodePtr> parse_comparison();
  Result<NodePtr> parse_binary_level(int level);
  Result<NodePtr> parse_test();
  Result<NodePtr> parse_filter();
  Result<NodePtr> parse_unary();
  Result<NodePtr> parse_call_member();
  Result<NodePtr> parse_call(NodePtr callee);
  Status parse_args(bool parameters, std::vector<NodePtr>& out);
  Result<NodePtr> parse_subscript();
  Result<NodePtr> parse_member(NodePtr object);
  Result<NodePtr> parse_primary();
  Result<NodePtr> parse_number(const Token& t);

  const std::string& source_;
  std::vector<Token> tokens_;
  size_t cur_ = 0;
  int depth_ = 0;
};

Result<NodePtr> Parser::parse_any() {
  const Token& t = tokens_[cur_];
  switch (t.type) {
    case T::kComment: {
      ++cur_;
      return make(NodeKind::kComment, t.pos);
    }
    case T::kText: {
      NodePtr n = make(NodeKind::kLiteral, t.pos);
      n->literal = Value::string(t.value);
      ++cur_;
      return n;
    }
    case T::kOpenStatement:
      return parse_statement();
    case T::kOpenExpression: {
      ++cur_;
      KITE_ASSIGN_OR_RETURN(NodePtr e, parse_expression());
      KITE_RETURN_IF_ERROR(expect(T::kCloseExpression, "'}}'"));
      return e;
    }
    default:
      return error("unexpected '" + t.value + "' outside of a tag");
  }
}

Result<NodePtr> Parser::parse_statement() {
  DepthGuard guard(depth_);
  KITE_RETURN_IF_ERROR(check_depth());
  const uint32_t at = tokens_[cur_].pos;
  ++cur_;  // {%
  if (!is(T::kIdentifier)) return error("expected a statement name after '{%'");
  const std::string name = tokens_[cur_++].value;
  if (name == "set") return parse_set(at);
  if (name == "if") {
    KITE_ASSIGN_OR_RETURN(NodePtr n, parse_if(at));
    KITE_RETURN_IF_ERROR(expect_end("endif"));
    return n;
  }
  if (name == "for") {
    KITE_ASSIGN_OR_RETURN(NodePtr n, parse_for(at));
    KITE_RETURN_IF_ERROR(expect_end("endfor"));
    return n;
  }
  if (name == "macro") {
    KITE_ASSIGN_OR_RETURN(NodePtr n, parse_macro(at));
    KITE_RETURN_IF_ERROR(expect_end("endmacro"));
    return n;
  }
  if (name == "call") return parse_call_block(at);
  if (name == "filter") return parse_filter_block(at);
  if (name == "break" || name == "continue") {
    KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
    return make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, at);
  }
  return error_at(at, "unknown or unexpected statement '" + name + "'");
}

Result<NodePtr> Parser::parse_set(uint32_t at) {
  NodePtr n = make(NodeKind::kSet, at);
  KITE_ASSIGN_OR_RETURN(n->a, parse_sequence(false));
  if (is(T::kEquals)) {
    ++cur_;
    KITE_ASSIGN_OR_RETURN(n->b, parse_sequence(false));
  } else {
    KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'=' or '%}'"));
    KITE_RETURN_IF_ERROR(parse_until({"endset"}, n->body, at, "set"));
    cur_ += 2;  // {% endset
  }
  KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
  return n;
}

Result<NodePtr> Parser::parse_if(uint32_t at) {
  NodePtr n = make(NodeKind::kIf, at);
  KITE_ASSIGN_OR_RETURN(n->a, parse_expression());
  KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
  KITE_RETURN_IF_ERROR(parse_until({"endif", "elif", "else"}, n->body, at, "if"));
  if (is_statement({"elif"})) {
    const uint32_t elif_at = tokens_[cur_].pos;
    cur_ += 2;
    DepthGuard guard(depth_);
    KITE_RETURN_IF_ERROR(check_depth());
    KITE_ASSIGN_OR_RETURN(NodePtr nested, parse_if(elif_at));
    n->alternate.push_back(std::move(nested));
  } else if (is_statement({"else"})) {
    cur_ += 2;
    KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
    KITE_RETURN_IF_ERROR(parse_until({"endif"}, n->alternate, at, "if"));
  }
  return n;
}

Result<NodePtr> Parser::parse_for(uint32_t at) {
  NodePtr n = make(NodeKind::kFor, at);
  KITE_ASSIGN_OR_RETURN(n->a, parse_sequence(true));
  if (n->a->kind != NodeKind::kIdentifier && n->a->kind != NodeKind::kTuple) {
    return error_at(n->a->pos, "expected a name or tuple of names as the loop variable");
  }
  if (!is_identifier("in")) return error("expected 'in' after the loop variable");
  ++cur_;
  KITE_ASSIGN_OR_RETURN(n->b, parse_expression());
  KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
  KITE_RETURN_IF_ERROR(parse_until({"endfor", "else"}, n->body, at, "for"));
  if (is_statement({"else"})) {
    cur_ += 2;
    KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
    KITE_RETURN_IF_ERROR(parse_until({"endfor"}, n->alternate, at, "for"));
  }
  return n;
}

Result<NodePtr> Parser::parse_macro(uint32_t at) {
  NodePtr n = make(NodeKind::kMacro, at);
  if (!is(T::kIdentifier)) return error("expected a macro name");
  n->name = tokens_[cur_++].value;
  KITE_RETURN_IF_ERROR(parse_args(true, n->items));
  KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
  KITE_RETURN_IF_ERROR(parse_until({"endmacro"}, n->body, at, "macro"));
  return n;
}

Result<NodePtr> Parser::parse_call_block(uint32_t at) {
  NodePtr n = make(NodeKind::kCallBlock, at);
  if (is(T::kOpenParen)) KITE_RETURN_IF_ERROR(parse_args(true, n->items));
  if (!is(T::kIdentifier)) return error("expected a macro name after 'call'");
  NodePtr callee = make(NodeKind::kIdentifier, pos());
  callee->name = tokens_[cur_++].value;
  NodePtr call = make(NodeKind::kCall, callee->pos);
  call->a = std::move(callee);
  KITE_RETURN_IF_ERROR(parse_args(false, call->items));
  n->a = std::move(call);
  KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
  KITE_RETURN_IF_ERROR(parse_until({"endcall"}, n->body, at, "call"));
  KITE_RETURN_IF_ERROR(expect_end("endcall"));
  return n;
}

Result<NodePtr> Parser::parse_filter_block(uint32_t at) {
  NodePtr n = make(NodeKind::kFilterBlock, at);
  if (!is(T::kIdentifier)) return error("expected a filter name after 'filter'");
  NodePtr filter = make(NodeKind::kIdentifier, pos());
  filter->name = tokens_[cur_++].value;
  if (is(T::kOpenParen)) {
    KITE_ASSIGN_OR_RETURN(filter, parse_call(std::move(filter)));
  }
  n->a = std::move(filter);
  KITE_RETURN_IF_ERROR(expect(T::kCloseStatement, "'%}'"));
  KITE_RETURN_IF_ERROR(parse_until({"endfilter"}, n->body, at, "filter"));
  KITE_RETURN_IF_ERROR(expect_end("endfilter"));
  return n;
}

// `a` or `a, b, c` (a tuple); `primary` restricts elements to atoms (loop targets).
Result<NodePtr> Parser::parse_sequence(bool primary) {
  const uint32_t at = pos();
  KITE_ASSIGN_OR_RETURN(NodePtr first, primary ? parse_primary() : parse_expression());
  if (!is(T::kComma)) return first;
  NodePtr tuple = make(NodeKind::kTuple, at);
  tuple->items.push_back(std::move(first));
  while (is(T::kComma)) {
    ++cur_;
    KITE_ASSIGN_OR_RETURN(NodePtr next, primary ? parse_primary() : parse_expression());
    tuple->items.push_back(std::move(next));
  }
  return tuple;
}

Result<NodePtr> Parser::parse_expression() {
  DepthGuard guard(depth_);
  KITE_RETURN_IF_ERROR(check_depth());
  const uint32_t at = pos();
  KITE_ASSIGN_OR_RETURN(NodePtr value, parse_or());
  if (!is_identifier("if")) return value;
  ++cur_;
  KITE_ASSIGN_OR_RETURN(NodePtr test, parse_or());
  if (!is_identifier("else")) {
    NodePtr n = make(NodeKind::kSelect, at);
    n->a = std::move(value);
    n->b = std::move(test);
    return n;
  }
  ++cur_;
  NodePtr n = make(NodeKind::kTernary, at);
  n->a = std::move(test);
  n->b = std::move(value);
  KITE_ASSIGN_OR_RETURN(n->c, parse_expression());
  return n;
}

Result<NodePtr> Parser::parse_or() {
  KITE_ASSIGN_OR_RETURN(NodePtr left, parse_and());
  ChainGuard chain(*this);
  while (is_identifier("or")) {
    KITE_RETURN_IF_ERROR(chain.link());
    NodePtr n = make(NodeKind::kBinary, tokens_[cur_++].pos);
    n->name = "or";
    n->a = std::move(left);
    KITE_ASSIGN_OR_RETURN(n->b, parse_and());
    left = std::move(n);
  }
  return left;
}

Result<NodePtr> Parser::parse_and() {
  KITE_ASSIGN_OR_RETURN(NodePtr left, parse_not());
  ChainGuard chain(*this);
  while (is_identifier("and")) {
    KITE_RETURN_IF_ERROR(chain.link());
    NodePtr n = make(NodeKind::kBinary, tokens_[cur_++].pos);
    n->name = "and";
    n->a = std::move(left);
    KITE_ASSIGN_OR_RETURN(n->b, parse_not());
    left = std::move(n);
  }
  return left;
}

Result<NodePtr> Parser::parse_not() {
  if (!is_identifier("not")) return parse_comparison();
  DepthGuard guard(depth_);
  KITE_RETURN_IF_ERROR(check_depth());
  NodePtr n = make(NodeKind::kUnary, tokens_[cur_++].pos);
  n->name = "not";
  KITE_ASSIGN_OR_RETURN(n->a, parse_not());
  return n;
}

Result<NodePtr> Parser::parse_comparison() {
  // Membership shares the comparison level and chains left to right, as in @huggingface/jinja.
  KITE_ASSIGN_OR_RETURN(NodePtr left, parse_binary_level(0));
  ChainGuard chain(*this);
  while (true) {
    std::string op;
    const uint32_t at = pos();
    if (is_identifier("not") && is_identifier("in", 1)) {
      op = "not in";
      cur_ += 2;
    } else if (is_identifier("in") || is(T::kComparison)) {
      op = tokens_[cur_++].value;
    } else {
      break;
    }
    KITE_RETURN_IF_ERROR(chain.link());
    NodePtr n = make(NodeKind::kBinary, at);
    n->name = op;
    n->a = std::move(left);
    KITE_ASSIGN_OR_RETURN(n->b, parse_binary_level(0));
    left = std::move(n);
  }
  return left;
}

// Levels: 0 = + - ~, 1 = * / // %, 2 = ** (left-associative, as in Jinja).
Result<NodePtr> Parser::parse_binary_level(int level) {
  static constexpr T kLevelToken[] = {T::kAdditive, T::kMultiplicative, T::kPower};
  auto next = [&]() { return level == 2 ? parse_test() : parse_binary_level(level + 1); };
  KITE_ASSIGN_OR_RETURN(NodePtr left, next());
  ChainGuard chain(*this);
  while (is(kLevelToken[level])) {
    KITE_RETURN_IF_ERROR(chain.link());
    NodePtr n = make(NodeKind::kBinary, tokens_[cur_].pos);
    n->name = tokens_[cur_++].value;
    n->a = std::move(left);
    KITE_ASSIGN_OR_RETURN(n->b, next());
    left = std::move(n);
  }
  return left;
}

Result<NodePtr> Parser::parse_test() {
  KITE_ASSIGN_OR_RETURN(NodePtr operand, parse_filter());
  ChainGuard chain(*this);
  while (is_identifier("is")) {
    KITE_RETURN_IF_ERROR(chain.link());
    NodePtr n = make(NodeKind::kTest, tokens_[cur_++].pos);
    if (is_identifier("not")) {
      n->flag = true;
      ++cur_;
    }
    if (!is(T::kIdentifier)) return error("expected a test name after 'is'");
    n->name = tokens_[cur_++].value;
    if (is(T::kOpenParen)) KITE_RETURN_IF_ERROR(parse_args(false, n->items));
    n->a = std::move(operand);
    operand = std::move(n);
  }
  return operand;
}

Result<NodePtr> Parser::parse_filter() {
  KITE_ASSIGN_OR_RETURN(NodePtr operand, parse_unary());
  ChainGuard chain(*this);
  while (is(T::kPipe)) {
    KITE_RETURN_IF_ERROR(chain.link());
    NodePtr n = make(NodeKind::kFilter, tokens_[cur_++].pos);
    if (!is(T::kIdentifier)) return error("expected a filter name after '|'");
    NodePtr filter = make(NodeKind::kIdentifier, pos());
    filter->name = tokens_[cur_++].value;
    if (is(T::kOpenParen)) {
      KITE_ASSIGN_OR_RETURN(filter, parse_call(std::move(filter)));
    }
    n->a = std::move(operand);
    n->b = std::move(filter);
    operand = std::move(n);
  }
  return operand;
}

Result<NodePtr> Parser::parse_unary() {
  if ((is(T::kUnary) || is(T::kAdditive)) &&
      (tokens_[cur_].value == "-" || tokens_[cur_].value == "+")) {
    DepthGuard guard(depth_);
    KITE_RETURN_IF_ERROR(check_depth());
    NodePtr n = make(NodeKind::kUnary, tokens_[cur_].pos);
    n->name = tokens_[cur_++].value;
    KITE_ASSIGN_OR_RETURN(n->a, parse_unary());
    return n;
  }
  return parse_call_member();
}

Result<NodePtr> Parser::parse_call_member() {
  KITE_ASSIGN_OR_RETURN(NodePtr primary, parse_primary());
  KITE_ASSIGN_OR_RETURN(NodePtr member, parse_member(std::move(primary)));
  if (is(T::kOpenParen)) return parse_call(std::move(member));
  return member;
}

Result<NodePtr> Parser::parse_call(NodePtr callee) {
  DepthGuard guard(depth_);
  KITE_RETURN_IF_ERROR(check_depth());
  NodePtr n = make(NodeKind::kCall, callee->pos);
  n->a = std::move(callee);
  KITE_RETURN_IF_ERROR(parse_args(false, n->items));
  KITE_ASSIGN_OR_RETURN(NodePtr expr, parse_member(std::move(n)));
  if (is(T::kOpenParen)) return parse_call(std::move(expr));
  return expr;
}

Status Parser::parse_args(bool parameters, std::vector<NodePtr>& out) {
  KITE_RETURN_IF_ERROR(expect(T::kOpenParen, "'('"));
  std::set<std::string> names;
  bool saw_keyword = false;
  bool saw_spread = false;
  while (!is(T::kCloseParen)) {
    if (cur_ >= tokens_.size()) return error("expected ')'");
    const uint32_t at = pos();
    const bool kw_spread = is(T::kPower);
    const bool spread = is(T::kMultiplicative) && tokens_[cur_].value == "*";
    if (parameters && (kw_spread || spread))
      return error("argument unpacking is not allowed in parameters");
    if (kw_spread) {
      ++cur_;
      NodePtr n = make(NodeKind::kKeywordSpread, at);
      KITE_ASSIGN_OR_RETURN(n->a, parse_expression());
      out.push_back(std::move(n));
      if (is(T::kComma)) ++cur_;
      if (!is(T::kCloseParen)) return error("'**' must be applied to the final argument");
      break;
    }
    NodePtr arg;
    if (spread) {
      if (saw_spread) return error("only one '*' argument unpacking is allowed");
      saw_spread = true;
      ++cur_;
      arg = make(NodeKind::kSpread, at);
      KITE_ASSIGN_OR_RETURN(arg->a, parse_expression());
    } else {
      KITE_ASSIGN_OR_RETURN(arg, parse_expression());
      if (is(T::kEquals)) {
        ++cur_;
        if (arg->kind != NodeKind::kIdentifier) return error_at(at, "expected a name before '='");
        NodePtr kw = make(NodeKind::kKeywordArg, at);
        kw->name = arg->name;
        KITE_ASSIGN_OR_RETURN(kw->a, parse_expression());
        arg = std::move(kw);
      }
      if (parameters) {
        if (arg->kind != NodeKind::kIdentifier && arg->kind != NodeKind::kKeywordArg) {
          return error_at(at, "expected a parameter name");
        }
        if (!names.insert(arg->name).second)
          return error_at(at, "duplicate parameter '" + arg->name + "'");
      }
      if (arg->kind == NodeKind::kKeywordArg) {
        saw_keyword = true;
      } else if (saw_keyword) {
        return error_at(at, parameters ? "non-default parameter follows default parameter"
                                       : "positional argument follows keyword argument");
      } else if (saw_spread) {
        return error_at(at, "positional argument follows '*' unpacking");
      }
    }
    out.push_back(std::move(arg));
    if (is(T::kComma)) ++cur_;
  }
  ++cur_;  // )
  return ok_status();
}

// Inside `[...]`: an index expression or a slice `start:stop:step` (parts optional).
Result<NodePtr> Parser::parse_subscript() {
  const uint32_t at = pos();
  std::vector<NodePtr> parts;
  bool is_slice = false;
  while (!is(T::kCloseBracket)) {
    if (cur_ >= tokens_.size()) return error("expected ']'");
    if (is(T::kColon)) {
      parts.push_back(nullptr);
      ++cur_;
      is_slice = true;
      continue;
    }
    KITE_ASSIGN_OR_RETURN(NodePtr e, parse_expression());
    parts.push_back(std::move(e));
    if (is(T::kColon)) {
      ++cur_;
      is_slice = true;
    } else if (!is_slice && !is(T::kCloseBracket)) {
      return error("expected ']'");
    }
  }
  if (parts.empty()) return error_at(at, "expected an index or slice inside '[]'");
  if (!is_slice) return std::move(parts[0]);
  if (parts.size() > 3) return error_at(at, "a slice takes at most 3 parts (start:stop:step)");
  NodePtr n = make(NodeKind::kSlice, at);
  parts.resize(3);
  n->a = std::move(parts[0]);
  n->b = std::move(parts[1]);
  n->c = std::move(parts[2]);
  return n;
}

Result<NodePtr> Parser::parse_member(NodePtr object) {
  ChainGuard chain(*this);
  while (is(T::kDot) || is(T::kOpenBracket)) {
    KITE_RETURN_IF_ERROR(chain.link());
    const bool computed = is(T::kOpenBracket);
    NodePtr n = make(NodeKind::kMember, tokens_[cur_++].pos);
    n->flag = computed;
    if (computed) {
      KITE_ASSIGN_OR_RETURN(n->b, parse_subscript());
      KITE_RETURN_IF_ERROR(expect(T::kCloseBracket, "']'"));
    } else {
      KITE_ASSIGN_OR_RETURN(n->b, parse_primary());
      const bool int_literal = n->b->kind == NodeKind::kLiteral && n->b->literal.is_int();
      if (n->b->kind != NodeKind::kIdentifier && !int_literal) {
        return error_at(n->b->pos, "expected a name or integer after '.'");
      }
    }
    n->a = std::move(object);
    object = std::move(n);
  }
  return object;
}

Result<NodePtr> Parser::parse_number(const Token& t) {
  NodePtr n = make(NodeKind::kLiteral, t.pos);
  const std::string& s = t.value;
  const size_t skip = (s[0] == '+') ? 1 : 0;
  if (s.find('.') == std::string::npos) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + skip, s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size()) {
      n->literal = Value::integer(v);
      return n;
    }
  }
  double d = 0;
  auto [p, ec] = std::from_chars(s.data() + skip, s.data() + s.size(), d);
  if (ec != std::errc()) return error_at(t.pos, "invalid number '" + s + "'");
  n->literal = Value::number(d);
  return n;
}

Result<NodePtr> Parser::parse_primary() {
  if (cur_ >= tokens_.size()) return error("unexpected end of template (an expression is missing)");
  const Token& t = tokens_[cur_++];
  switch (t.type) {
    case T::kNumber:
      return parse_number(t);
    case T::kString: {
      std::string value = t.value;
      while (is(T::kString)) value += tokens_[cur_++].value;  // 'a' 'b' is 'ab', as in Python
      NodePtr n = make(NodeKind::kLiteral, t.pos);
      n->literal = Value::string(std::move(value));
      return n;
    }
    case T::kIdentifier: {
      NodePtr n = make(NodeKind::kIdentifier, t.pos);
      n->name = t.value;
      return n;
    }
    case T::kOpenParen: {
      DepthGuard guard(depth_);
      KITE_RETURN_IF_ERROR(check_depth());
      KITE_ASSIGN_OR_RETURN(NodePtr e, parse_sequence(false));
      KITE_RETURN_IF_ERROR(expect(T::kCloseParen, "')'"));
      return e;
    }
    case T::kOpenBracket:
    case T::kOpenBrace: {
      DepthGuard guard(depth_);
      KITE_RETURN_IF_ERROR(check_depth());
      const bool array = t.type == T::kOpenBracket;
      const T close = array ? T::kCloseBracket : T::kCloseBrace;
      NodePtr n = make(array ? NodeKind::kArray : NodeKind::kDict, t.pos);
      while (!is(close)) {
        if (cur_ >= tokens_.size()) return error(array ? "expected ']'" : "expected '}'");
        KITE_ASSIGN_OR_RETURN(NodePtr e, parse_expression());
        n->items.push_back(std::move(e));
        if (!array) {
          KITE_RETURN_IF_ERROR(expect(T::kColon, "':' between key and value"));
          KITE_ASSIGN_OR_RETURN(NodePtr v, parse_expression());
          n->items.push_back(std::move(v));
        }
        if (is(T::kComma)) ++cur_;
      }
      ++cur_;
      return n;
    }
    default:
      return error_at(t.pos, "unexpected '" + t.value + "'");
  }
}

}  // namespace

Result<std::shared_ptr<const Program>> parse_template(std::string source) {
  auto program = std::make_shared<Program>();
  program->source = std::move(source);
  KITE_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(program->source));
  Parser parser(program->source, std::move(tokens));
  KITE_RETURN_IF_ERROR(parser.parse_program(program->body));
  return std::shared_ptr<const Program>(std::move(program));
}

}  // namespace kite::jinja
