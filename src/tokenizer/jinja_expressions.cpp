// Expression evaluation of the Jinja interpreter (statements are in jinja_interpreter.cpp).
#include <cmath>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"

namespace kite::jinja {

Result<Value> Interpreter::eval(const Node& n, Env& env) {
  switch (n.kind) {
    case NodeKind::kLiteral:
      return n.literal;
    case NodeKind::kArray:
    case NodeKind::kTuple: {
      Array a;
      a.reserve(n.items.size());
      for (const NodePtr& item : n.items) {
        KITE_ASSIGN_OR_RETURN(Value v, eval(*item, env));
        a.push_back(std::move(v));
      }
      return Value::array(std::move(a));
    }
    case NodeKind::kDict: {
      Object o;
      for (size_t i = 0; i + 1 < n.items.size(); i += 2) {
        KITE_ASSIGN_OR_RETURN(Value key, eval(*n.items[i], env));
        if (!key.is_string())
          return error(*n.items[i], "dict keys must be strings, got a " + key.type_name());
        KITE_ASSIGN_OR_RETURN(Value value, eval(*n.items[i + 1], env));
        bool replaced = false;
        for (auto& [k, v] : o) {
          if (k == key.as_string()) {
            v = value;
            replaced = true;
          }
        }
        if (!replaced) o.emplace_back(key.as_string(), std::move(value));
      }
      return Value::object(std::move(o));
    }
    case NodeKind::kIdentifier: {
      const Value* v = env.lookup(n.name);
      return v != nullptr ? *v : Value();
    }
    case NodeKind::kMember:
      return eval_member(n, env);
    case NodeKind::kCall:
      return eval_call(n, env);
    case NodeKind::kUnary: {
      KITE_ASSIGN_OR_RETURN(Value v, eval(*n.a, env));
      if (n.name == "not") return Value::boolean(!v.truthy());
      const double sign = n.name == "-" ? -1.0 : 1.0;
      if (v.is_float()) return Value::number(sign * v.as_float());
      if (v.is_int() || v.is_bool()) {
        const int64_t i = v.is_int() ? v.as_int() : (v.as_bool() ? 1 : 0);
        if (i == INT64_MIN && sign < 0) return Value::number(-static_cast<double>(i));
        return Value::integer(sign < 0 ? -i : i);
      }
      return error(n, "unary '" + n.name + "' needs a number, got a " + v.type_name());
    }
    case NodeKind::kBinary:
      return eval_binary(n, env);
    case NodeKind::kFilter: {
      KITE_ASSIGN_OR_RETURN(Value operand, eval(*n.a, env));
      return eval_filter(*n.b, operand, env);
    }
    case NodeKind::kTest: {
      KITE_ASSIGN_OR_RETURN(Value operand, eval(*n.a, env));
      KITE_ASSIGN_OR_RETURN(CallArgs args, eval_args(n.items, env));
      auto r = apply_test(n.name, operand, args);
      if (!r.ok()) return locate(n, r.status());
      return Value::boolean(n.flag ? !r.value() : r.value());
    }
    case NodeKind::kSelect: {
      KITE_ASSIGN_OR_RETURN(Value test, eval(*n.b, env));
      if (!test.truthy()) return Value();
      return eval(*n.a, env);
    }
    case NodeKind::kTernary: {
      KITE_ASSIGN_OR_RETURN(Value test, eval(*n.a, env));
      return eval(test.truthy() ? *n.b : *n.c, env);
    }
    default:
      return error(n, "this construct is not valid inside an expression");
  }
}

Result<CallArgs> Interpreter::eval_args(const std::vector<NodePtr>& items, Env& env) {
  CallArgs args;
  // Positional arguments (with `*` unpacking) are all evaluated before keyword ones.
  for (const NodePtr& item : items) {
    if (item->kind == NodeKind::kKeywordArg || item->kind == NodeKind::kKeywordSpread) continue;
    if (item->kind == NodeKind::kSpread) {
      KITE_ASSIGN_OR_RETURN(Value v, eval(*item->a, env));
      if (!v.is_array()) return error(*item, "cannot unpack a " + v.type_name() + " with '*'");
      for (const Value& e : v.as_array()) args.positional.push_back(e);
      continue;
    }
    KITE_ASSIGN_OR_RETURN(Value v, eval(*item, env));
    args.positional.push_back(std::move(v));
  }
  auto add_keyword = [&](const Node& at, const std::string& key, Value v) -> Status {
    for (const auto& [k, unused] : args.keyword) {
      if (k == key) return error(at, "keyword argument '" + key + "' given twice");
    }
    args.keyword.emplace_back(key, std::move(v));
    return ok_status();
  };
  for (const NodePtr& item : items) {
    if (item->kind == NodeKind::kKeywordArg) {
      KITE_ASSIGN_OR_RETURN(Value v, eval(*item->a, env));
      KITE_RETURN_IF_ERROR(add_keyword(*item, item->name, std::move(v)));
    } else if (item->kind == NodeKind::kKeywordSpread) {
      KITE_ASSIGN_OR_RETURN(Value v, eval(*item->a, env));
      if (!v.is_object()) return error(*item, "'**' needs a mapping, got a " + v.type_name());
      for (const auto& [k, e] : v.as_object()) KITE_RETURN_IF_ERROR(add_keyword(*item, k, e));
    }
  }
  return args;
}

Result<Value> Interpreter::eval_call(const Node& n, Env& env) {
  KITE_ASSIGN_OR_RETURN(CallArgs args, eval_args(n.items, env));
  KITE_ASSIGN_OR_RETURN(Value fn, eval(*n.a, env));
  if (!fn.is_function()) {
    std::string name = n.a->kind == NodeKind::kIdentifier ? n.a->name
                       : (n.a->kind == NodeKind::kMember && n.a->b->kind == NodeKind::kIdentifier)
                           ? n.a->b->name
                           : "expression";
    return error(n, "'" + name + "' is not callable (it is " +
                        (fn.is_undefined() ? std::string("undefined") : "a " + fn.type_name()) +
                        ")");
  }
  auto result = fn.as_function()(args, env);
  if (!result.ok()) return locate(n, result.status());
  return result;
}

Result<Value> Interpreter::eval_filter(const Node& filter, const Value& operand, Env& env) {
  CallArgs args;
  const Node* name_node = &filter;
  if (filter.kind == NodeKind::kCall) {
    name_node = filter.a.get();
    KITE_ASSIGN_OR_RETURN(args, eval_args(filter.items, env));
  }
  if (name_node->kind != NodeKind::kIdentifier) return error(filter, "invalid filter expression");
  auto result = apply_filter(name_node->name, operand, args, env);
  if (!result.ok()) return locate(filter, result.status());
  return result;
}

Result<Value> Interpreter::eval_slice(const Node& n, const Value& object, Env& env) {
  if (!object.is_array() && !object.is_string())
    return error(n, "cannot slice a " + object.type_name());
  Value parts[3];
  const Node* nodes[3] = {n.a.get(), n.b.get(), n.c.get()};
  for (int i = 0; i < 3; ++i) {
    if (nodes[i] == nullptr) continue;
    KITE_ASSIGN_OR_RETURN(parts[i], eval(*nodes[i], env));
    if (!parts[i].is_int() && !parts[i].is_undefined()) {
      return error(n, "slice bounds must be integers, got a " + parts[i].type_name());
    }
  }
  return slice_value(object, parts[0], parts[1], parts[2]);
}

Result<Value> Interpreter::eval_member(const Node& n, Env& env) {
  KITE_ASSIGN_OR_RETURN(Value object, eval(*n.a, env));
  const Node& prop = *n.b;
  if (n.flag && prop.kind == NodeKind::kSlice) return eval_slice(prop, object, env);
  Value key;
  if (n.flag) {
    KITE_ASSIGN_OR_RETURN(key, eval(prop, env));
  } else if (prop.kind == NodeKind::kLiteral) {
    key = prop.literal;
  } else {
    key = Value::string(prop.name);
  }
  if (object.is_object() || object.is_namespace()) {
    if (!key.is_string()) return error(n, "mapping keys are strings, got a " + key.type_name());
    if (const Value* v = object.find(key.as_string())) return *v;
    return object.is_object() ? builtin_member(object, key.as_string()) : Value();
  }
  if (object.is_array() || object.is_string()) {
    if (key.is_int()) {
      if (object.is_array()) {
        const Array& a = object.as_array();
        int64_t i = key.as_int();
        if (i < 0) i += static_cast<int64_t>(a.size());
        return (i >= 0 && i < static_cast<int64_t>(a.size())) ? a[static_cast<size_t>(i)] : Value();
      }
      const int64_t i = key.as_int();
      const Value stop = (i == -1 || i == INT64_MAX) ? Value() : Value::integer(i + 1);
      const Value sliced = slice_value(object, key, stop, Value::integer(1));
      return sliced.as_string().empty() ? Value() : sliced;
    }
    if (key.is_string()) return builtin_member(object, key.as_string());
    return error(n, "cannot index a " + object.type_name() + " with a " + key.type_name());
  }
  if (!key.is_string())
    return error(n, "cannot index a " + object.type_name() + " with a " + key.type_name());
  return Value();  // attributes of none/undefined/numbers are undefined, as in @huggingface/jinja
}

Result<Value> Interpreter::concat(const Node& n, std::string text) const {
  if (text.size() > limits_.max_output_bytes) {
    return Status(ErrorCode::kResourceExhausted,
                  "template string exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  return Value::string(std::move(text));
}

static Result<Value> numeric_binary(const std::string& op, const Value& l, const Value& r) {
  const bool ints = l.is_int() && r.is_int();
  const double a = l.as_double();
  const double b = r.as_double();
  if (op == "<") return Value::boolean(a < b);
  if (op == ">") return Value::boolean(a > b);
  if (op == "<=") return Value::boolean(a <= b);
  if (op == ">=") return Value::boolean(a >= b);
  if (op == "+" || op == "-" || op == "*") {
    if (ints) {
      int64_t out = 0;
      const int64_t x = l.as_int();
      const int64_t y = r.as_int();
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &out)
                            : op == "-" ? __builtin_sub_overflow(x, y, &out)
                                        : __builtin_mul_overflow(x, y, &out);
      if (!overflow) return Value::integer(out);
    }
    return Value::number(op == "+" ? a + b : op == "-" ? a - b : a * b);
  }
  if (b == 0 && (op == "/" || op == "//" || op == "%")) return invalid_argument("division by zero");
  if (op == "/") return Value::number(a / b);
  if (op == "//") {
    const double q = std::floor(a / b);
    return ints ? Value::integer(static_cast<int64_t>(q)) : Value::number(q);
  }
  if (op == "%") {
    if (ints) {
      if (r.as_int() == -1) return Value::integer(0);
      return Value::integer(l.as_int() % r.as_int());
    }
    return Value::number(std::fmod(a, b));
  }
  if (op == "**") {
    if (a == 0 && b < 0) return invalid_argument("0 cannot be raised to a negative power");
    const double p = std::pow(a, b);
    if (!std::isfinite(p)) return invalid_argument("'**' result is not a finite real number");
    if (ints && b >= 0 && std::fabs(p) < 9.2e18) return Value::integer(static_cast<int64_t>(p));
    return Value::number(p);
  }
  return invalid_argument("unknown operator '" + op + "' between numbers");
}

Result<Value> Interpreter::eval_binary(const Node& n, Env& env) {
  const std::string& op = n.name;
  KITE_ASSIGN_OR_RETURN(Value l, eval(*n.a, env));
  if (op == "and") return l.truthy() ? eval(*n.b, env) : l;
  if (op == "or") return l.truthy() ? l : eval(*n.b, env);
  KITE_ASSIGN_OR_RETURN(Value r, eval(*n.b, env));
  if (op == "==") return Value::boolean(loose_equals(l, r));
  if (op == "!=") return Value::boolean(!loose_equals(l, r));
  const bool membership = op == "in" || op == "not in";
  if (l.is_undefined() || r.is_undefined()) {
    // `x in undefined` is false rather than an error, as in @huggingface/jinja.
    if (r.is_undefined() && membership) return Value::boolean(op == "not in");
    return error(n, "cannot apply '" + op + "' to an undefined value");
  }
  if ((l.is_none() && !(membership && r.is_array())) || r.is_none()) {
    return error(n, "cannot apply '" + op + "' to none");
  }
  if (op == "~") return concat(n, to_output_string(l) + to_output_string(r));
  const bool l_num = l.is_number() || (op == "**" && l.is_bool());
  const bool r_num = r.is_number() || (op == "**" && r.is_bool());
  if (l_num && r_num) {
    auto v = numeric_binary(op, l, r);
    if (!v.ok()) return locate(n, v.status());
    return v;
  }
  if (l.is_array() && r.is_array() && op == "+") {
    Array a = l.as_array();
    a.insert(a.end(), r.as_array().begin(), r.as_array().end());
    return Value::array(std::move(a));
  }
  if (r.is_array() && membership) {
    bool found = false;
    for (const Value& e : r.as_array()) found = found || strict_equals(l, e);
    return Value::boolean(found == (op == "in"));
  }
  if ((l.is_string() || r.is_string()) && op == "+")
    return concat(n, to_output_string(l) + to_output_string(r));
  if (l.is_string() && r.is_string()) {
    if (membership)
      return Value::boolean((r.as_string().find(l.as_string()) != std::string::npos) ==
                            (op == "in"));
    const int c = l.as_string().compare(r.as_string());
    if (op == "<") return Value::boolean(c < 0);
    if (op == ">") return Value::boolean(c > 0);
    if (op == "<=") return Value::boolean(c <= 0);
    if (op == ">=") return Value::boolean(c >= 0);
  }
  if (l.is_string() && r.is_object() && membership) {
    return Value::boolean((r.find(l.as_string()) != nullptr) == (op == "in"));
  }
  return error(n, "unsupported operator '" + op + "' between a " + l.type_name() + " and a " +
                      r.type_name());
}

}  // namespace kite::jinja
