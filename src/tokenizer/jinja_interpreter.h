// Jinja evaluator: renders a parsed Program against a set of global variables.
//
// Semantics follow @huggingface/jinja (what transformers.js renders chat templates with),
// with these deliberate differences, each where that library departs from Python Jinja2
// (what transformers and vLLM render with):
//  - str.strip/lstrip/rstrip(chars) honour their `chars` argument (the JS library ignores
//    it and strips all whitespace);
//  - floats print like Python (`tojson` of 1.0 is "1.0", 1e-7 is "1e-07");
//  - arrays and objects compare by value with == (the JS library compares references);
//  - output written by a loop iteration before `{% break %}`/`{% continue %}` is kept, and
//    a for-else block runs only when the loop had no items;
//  - where the JS library throws but Python Jinja2 has a meaning (iterating a string,
//    comparing strings with <, `is divisibleby(n)`...), the Python meaning is used.
// Rendering is bounded (RenderLimits): deep macro recursion, runaway loops and huge outputs
// end in an error, never a hang or a crash.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace kite::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{256} << 20;  // also caps any single string value
  int64_t max_loop_iterations = 10'000'000;     // summed over every loop of one render
  int max_call_depth = 64;                      // nested macro calls
};

// A variable scope. Lookups walk to the parent; `set` writes this scope only, so a `set`
// inside a loop body is not visible after the loop (Jinja scoping).
class Env {
 public:
  explicit Env(Env* parent) : parent_(parent) {}
  const Value* lookup(std::string_view name) const;
  void set(std::string_view name, Value value);
  void clear() { vars_.clear(); }

 private:
  Env* parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

// Installs true/false/none (and True/False/None), namespace, range, raise_exception and
// strftime_now into `env`.
void install_globals(Env& env);

class Interpreter {
 public:
  Interpreter(const Program& program, RenderLimits limits) : program_(program), limits_(limits) {}
  // Renders the whole program; `globals` holds the builtins and the caller's variables.
  Result<std::string> render(Env& globals);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Env& new_env(Env* parent);
  Status error(const Node& n, const std::string& message) const;
  Status locate(const Node& n, const Status& s) const;
  Status append_output(std::string& out, std::string_view text) const;

  Status exec_block(const std::vector<NodePtr>& body, Env& env, std::string& out, Flow& flow);
  Status exec(const Node& n, Env& env, std::string& out, Flow& flow);
  Status exec_set(const Node& n, Env& env);
  Status exec_for(const Node& n, Env& env, std::string& out);
  Status bind_target(const Node& target, const Value& value, Env& env);
  Status exec_macro(const Node& n, Env& env);
  Status exec_call_block(const Node& n, Env& env, std::string& out);
  Result<Value> call_macro(const Node& macro, const CallArgs& args, Env& caller_env,
                           const char* what);
  Status bind_parameters(const Node& macro, const CallArgs& args, Env& scope);

  Result<Value> eval(const Node& n, Env& env);
  Result<Value> eval_binary(const Node& n, Env& env);
  Result<Value> eval_member(const Node& n, Env& env);
  Result<Value> eval_slice(const Node& n, const Value& object, Env& env);
  Result<Value> eval_call(const Node& n, Env& env);
  Result<Value> eval_filter(const Node& filter, const Value& operand, Env& env);
  Result<CallArgs> eval_args(const std::vector<NodePtr>& items, Env& env);
  Result<Value> concat(const Node& n, std::string text) const;

  const Program& program_;
  RenderLimits limits_;
  std::deque<Env> envs_;  // every scope of this render; closures may outlive their block
  int64_t iterations_ = 0;
  int call_depth_ = 0;
};

}  // namespace kite::jinja
