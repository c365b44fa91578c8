#include "tokenizer/jinja_interpreter.h"

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_text.h"

namespace kite::jinja {

const Value* Env::lookup(std::string_view name) const {
  for (const Env* e = this; e != nullptr; e = e->parent_) {
    for (const auto& [k, v] : e->vars_) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Env::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(value));
}

static constexpr std::string_view kErrorPrefix = "template error at ";

Env& Interpreter::new_env(Env* parent) { return envs_.emplace_back(parent); }

Status Interpreter::error(const Node& n, const std::string& message) const {
  return invalid_argument(std::string(kErrorPrefix) + describe_position(program_.source, n.pos) +
                          ": " + message);
}

// Adds the node's position to an error from a builtin, once (errors from nested macro
// calls already carry the innermost position).
Status Interpreter::locate(const Node& n, const Status& s) const {
  if (s.ok() || s.message().rfind(kErrorPrefix, 0) == 0) return s;
  return error(n, s.message());
}

Status Interpreter::append_output(std::string& out, std::string_view text) const {
  if (out.size() + text.size() > limits_.max_output_bytes) {
    return Status(ErrorCode::kResourceExhausted,
                  "template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  out.append(text);
  return ok_status();
}

Result<std::string> Interpreter::render(Env& globals) {
  std::string out;
  Flow flow = Flow::kNormal;
  KITE_RETURN_IF_ERROR(exec_block(program_.body, globals, out, flow));
  if (flow != Flow::kNormal)
    return invalid_argument("template error: break/continue outside of a loop");
  return out;
}

Status Interpreter::exec_block(const std::vector<NodePtr>& body, Env& env, std::string& out,
                               Flow& flow) {
  for (const NodePtr& n : body) {
    KITE_RETURN_IF_ERROR(exec(*n, env, out, flow));
    if (flow != Flow::kNormal) return ok_status();
  }
  return ok_status();
}

Status Interpreter::exec(const Node& n, Env& env, std::string& out, Flow& flow) {
  switch (n.kind) {
    case NodeKind::kComment:
    case NodeKind::kKeywordArg:
      return ok_status();
    case NodeKind::kBreak:
      flow = Flow::kBreak;
      return ok_status();
    case NodeKind::kContinue:
      flow = Flow::kContinue;
      return ok_status();
    case NodeKind::kSet:
      return exec_set(n, env);
    case NodeKind::kIf: {
      KITE_ASSIGN_OR_RETURN(Value test, eval(*n.a, env));
      return exec_block(test.truthy() ? n.body : n.alternate, env, out, flow);
    }
    case NodeKind::kFor:
      return exec_for(n, env, out);
    case NodeKind::kMacro:
      return exec_macro(n, env);
    case NodeKind::kCallBlock:
      return exec_call_block(n, env, out);
    case NodeKind::kFilterBlock: {
      std::string inner;
      Flow inner_flow = Flow::kNormal;
      KITE_RETURN_IF_ERROR(exec_block(n.body, env, inner, inner_flow));
      KITE_ASSIGN_OR_RETURN(Value v, eval_filter(*n.a, Value::string(std::move(inner)), env));
      return append_output(out, to_output_string(v));
    }
    default: {
      KITE_ASSIGN_OR_RETURN(Value v, eval(n, env));
      if (v.is_string()) return append_output(out, v.as_string());
      return append_output(out, to_output_string(v));
    }
  }
}

namespace {

// Whether `v` holds the namespace whose fields are `ns` (is it, or holds it inside an array,
// object or namespace). `{% set ns.x = ns %}` would make a namespace hold itself: a reference
// cycle its shared pointers never free (found by the chat-template fuzzer). Past `depth_left`
// levels the answer is a conservative yes.
bool holds_namespace(const Value& v, const Object* ns, int depth_left = 64) {
  if (depth_left == 0) return v.is_array() || v.is_object() || v.is_namespace();
  auto any_field = [&](const Object& fields) {
    for (const auto& [k, f] : fields)
      if (holds_namespace(f, ns, depth_left - 1)) return true;
    return false;
  };
  if (v.is_namespace()) return &v.namespace_fields() == ns || any_field(v.namespace_fields());
  if (v.is_object()) return any_field(v.as_object());
  if (v.is_array())
    for (const Value& e : v.as_array())
      if (holds_namespace(e, ns, depth_left - 1)) return true;
  return false;
}

}  // namespace

Status Interpreter::exec_set(const Node& n, Env& env) {
  Value rhs;
  if (n.b) {
    KITE_ASSIGN_OR_RETURN(rhs, eval(*n.b, env));
  } else {
    std::string body;
    Flow flow = Flow::kNormal;
    KITE_RETURN_IF_ERROR(exec_block(n.body, env, body, flow));
    rhs = Value::string(std::move(body));
  }
  const Node& target = *n.a;
  if (target.kind == NodeKind::kMember) {
    KITE_ASSIGN_OR_RETURN(Value object, eval(*target.a, env));
    if (!object.is_namespace()) {
      return error(
          n, "cannot assign an attribute of a " + object.type_name() + " (only of a namespace())");
    }
    if (target.flag || target.b->kind != NodeKind::kIdentifier) {
      return error(n, "namespace attributes are assigned as ns.name");
    }
    Object& fields = object.namespace_fields();
    if (holds_namespace(rhs, &fields))
      return error(n, "a namespace cannot hold itself (ns." + target.b->name + " = ns)");
    for (auto& [k, v] : fields) {
      if (k == target.b->name) {
        v = std::move(rhs);
        return ok_status();
      }
    }
    fields.emplace_back(target.b->name, std::move(rhs));
    return ok_status();
  }
  return bind_target(target, rhs, env);
}

// Assigns `value` to a name or unpacks it into a tuple of names.
Status Interpreter::bind_target(const Node& target, const Value& value, Env& env) {
  if (target.kind == NodeKind::kIdentifier) {
    env.set(target.name, value);
    return ok_status();
  }
  if (target.kind != NodeKind::kTuple)
    return error(target, "can only assign to names, tuples and ns.attr");
  if (!value.is_array())
    return error(target, "cannot unpack a " + value.type_name() + " into a tuple");
  const Array& items = value.as_array();
  if (items.size() != target.items.size()) {
    return error(target, "cannot unpack " + std::to_string(items.size()) + " values into " +
                             std::to_string(target.items.size()) + " names");
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (target.items[i]->kind != NodeKind::kIdentifier)
      return error(target, "can only unpack into names");
    env.set(target.items[i]->name, items[i]);
  }
  return ok_status();
}

Status Interpreter::exec_for(const Node& n, Env& env, std::string& out) {
  Env& scope = new_env(&env);
  const bool filtered = n.b->kind == NodeKind::kSelect;
  KITE_ASSIGN_OR_RETURN(Value iterable, eval(filtered ? *n.b->a : *n.b, scope));
  Array all;
  if (iterable.is_array()) {
    all = iterable.as_array();
  } else if (iterable.is_object()) {
    for (const auto& [k, v] : iterable.as_object()) all.push_back(Value::string(k));
  } else if (iterable.is_string()) {
    for (auto& c : split_code_points(iterable.as_string()))
      all.push_back(Value::string(std::move(c)));
  } else {
    return error(n, "cannot loop over a " + iterable.type_name());
  }
  Array items;
  if (filtered) {
    Env& test_scope = new_env(&scope);
    for (Value& item : all) {
      test_scope.clear();
      KITE_RETURN_IF_ERROR(bind_target(*n.a, item, test_scope));
      KITE_ASSIGN_OR_RETURN(Value keep, eval(*n.b->b, test_scope));
      if (keep.truthy()) items.push_back(std::move(item));
    }
  } else {
    items = std::move(all);
  }
  const int64_t count = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < count; ++i) {
    if (++iterations_ > limits_.max_loop_iterations) {
      return error(n, "template exceeds " + std::to_string(limits_.max_loop_iterations) +
                          " loop iterations");
    }
    Object loop = {
        {"index", Value::integer(i + 1)},
        {"index0", Value::integer(i)},
        {"revindex", Value::integer(count - i)},
        {"revindex0", Value::integer(count - i - 1)},
        {"first", Value::boolean(i == 0)},
        {"last", Value::boolean(i == count - 1)},
        {"length", Value::integer(count)},
        {"previtem", i > 0 ? items[i - 1] : Value()},
        {"nextitem", i + 1 < count ? items[i + 1] : Value()},
    };
    scope.set("loop", Value::object(std::move(loop)));
    KITE_RETURN_IF_ERROR(bind_target(*n.a, items[i], scope));
    Flow flow = Flow::kNormal;
    KITE_RETURN_IF_ERROR(exec_block(n.body, scope, out, flow));
    if (flow == Flow::kBreak) break;
  }
  if (count == 0) {
    Flow flow = Flow::kNormal;
    KITE_RETURN_IF_ERROR(exec_block(n.alternate, scope, out, flow));
  }
  return ok_status();
}

Status Interpreter::exec_macro(const Node& n, Env& env) {
  const Node* macro = &n;
  env.set(n.name, Value::function([this, macro](const CallArgs& args, Env& caller_env) {
            return call_macro(*macro, args, caller_env, "macro");
          }));
  return ok_status();
}

// Binds parameters: positional first, then keywords, then defaults (evaluated in the macro
// scope so they may refer to earlier parameters). Extra arguments land in varargs/kwargs.
Status Interpreter::bind_parameters(const Node& macro, const CallArgs& args, Env& scope) {
  std::vector<std::pair<std::string, Value>> kwargs = args.keyword;
  std::vector<const Node*> pending;
  for (size_t i = 0; i < macro.items.size(); ++i) {
    const Node& p = *macro.items[i];
    Value value;
    bool bound = false;
    if (i < args.positional.size()) {
      value = args.positional[i];
      bound = true;
    } else {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
        if (it->first == p.name) {
          value = it->second;
          kwargs.erase(it);
          bound = true;
          break;
        }
      }
    }
    if (!bound && p.kind == NodeKind::kKeywordArg) pending.push_back(&p);
    scope.set(p.name, value);
  }
  Array varargs;
  for (size_t i = macro.items.size(); i < args.positional.size(); ++i)
    varargs.push_back(args.positional[i]);
  scope.set("varargs", Value::array(std::move(varargs)));
  scope.set("kwargs", Value::object(Object(kwargs.begin(), kwargs.end())));
  for (const Node* p : pending) {
    KITE_ASSIGN_OR_RETURN(Value v, eval(*p->a, scope));
    scope.set(p->name, std::move(v));
  }
  return ok_status();
}

Result<Value> Interpreter::call_macro(const Node& macro, const CallArgs& args, Env& caller_env,
                                      const char* what) {
  if (call_depth_ >= limits_.max_call_depth) {
    return error(macro, std::string(what) + " calls nest deeper than " +
                            std::to_string(limits_.max_call_depth));
  }
  ++call_depth_;
  Env& scope = new_env(&caller_env);
  std::string out;
  Flow flow = Flow::kNormal;
  Status st = bind_parameters(macro, args, scope);
  if (st.ok()) st = exec_block(macro.body, scope, out, flow);
  --call_depth_;
  KITE_RETURN_IF_ERROR(st);
  if (flow != Flow::kNormal) return error(macro, "break/continue outside of a loop");
  return Value::string(std::move(out));
}

Status Interpreter::exec_call_block(const Node& n, Env& env, std::string& out) {
  const Node* block = &n;
  Value caller = Value::function([this, block, &env](const CallArgs& args, Env&) {
    return call_macro(*block, args, env, "caller()");
  });
  KITE_ASSIGN_OR_RETURN(CallArgs args, eval_args(n.a->items, env));
  KITE_ASSIGN_OR_RETURN(Value fn, eval(*n.a->a, env));
  if (!fn.is_function()) return error(n, "'" + n.a->a->name + "' is not a macro");
  Env& call_env = new_env(&env);
  call_env.set("caller", std::move(caller));
  auto result = fn.as_function()(args, call_env);
  if (!result.ok()) return locate(n, result.status());
  return append_output(out, to_output_string(result.value()));
}

}  // namespace kite::jinja
