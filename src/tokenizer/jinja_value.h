// Runtime values of the Jinja interpreter.
//
// A Value is one of: undefined, none, bool, int, float, string, array, object, namespace,
// function. Containers are shared and immutable once built (templates cannot mutate their
// inputs), so copying a Value is a reference-count bump. The single exception is a
// namespace: `{% set ns.x = ... %}` must be seen by every holder of that namespace, so its
// fields are shared *mutable* state. Objects keep insertion order, like a Python dict, so a
// tool schema renders through `tojson` with its keys in the order the client sent them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"

namespace kite::jinja {

class Value;
class Env;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;

// Arguments of a call: `f(a, b, key=c)`.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The i-th positional argument, else the keyword `name`, else nullptr.
  const Value* get(size_t i, std::string_view name) const;
};

// A callable: a builtin (range, raise_exception, a bound string method) or a macro. `env` is
// the caller's scope, which macros run under (as @huggingface/jinja does).
using NativeFn = std::function<Result<Value>(const CallArgs& args, Env& env)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kArray,
    kObject,
    kNamespace,
    kFunction
  };

  Value() = default;  // undefined
  static Value none() { return Value(Storage(nullptr)); }
  static Value boolean(bool b) { return Value(Storage(b)); }
  static Value integer(int64_t i) { return Value(Storage(i)); }
  static Value number(double d) { return Value(Storage(d)); }
  static Value string(std::string s);
  static Value array(Array a);
  static Value object(Object o);
  static Value make_namespace(Object fields);
  static Value function(NativeFn fn);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_array() const { return kind() == Kind::kArray; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_function() const { return kind() == Kind::kFunction; }

  // Accessors; calling one for another kind is a programming error (checked by variant).
  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  double as_double() const;  // int, float or bool as a double
  const std::string& as_string() const { return *std::get<StrPtr>(v_); }
  const Array& as_array() const { return *std::get<ArrPtr>(v_); }
  const Object& as_object() const { return *std::get<ObjPtr>(v_); }
  Object& namespace_fields() const { return *std::get<NsPtr>(v_); }
  const NativeFn& as_function() const { return *std::get<FnPtr>(v_); }

  // Field of an object or namespace; nullptr when absent or not a mapping.
  const Value* find(std::string_view key) const;
  // Python/Jinja truthiness: empty string/array/object, 0, none and undefined are false.
  bool truthy() const;
  // Kind name used in error messages ("string", "array", ...).
  std::string type_name() const;

 private:
  using StrPtr = std::shared_ptr<const std::string>;
  using ArrPtr = std::shared_ptr<const Array>;
  using ObjPtr = std::shared_ptr<const Object>;
  using NsPtr = std::shared_ptr<Object>;
  using FnPtr = std::shared_ptr<const NativeFn>;
  // Index order must match Kind.
  using Storage = std::variant<std::monostate, std::nullptr_t, bool, int64_t, double, StrPtr,
                               ArrPtr, ObjPtr, NsPtr, FnPtr>;
  explicit Value(Storage v) : v_(std::move(v)) {}
  Storage v_;
};

// JSON data -> Value. Integers stay ints, floats stay floats, key order is kept. Data
// nested deeper than kMaxJsonDepth is rejected (conversion and rendering recurse).
inline constexpr int kMaxJsonDepth = 512;
Result<Value> from_json(const nlohmann::ordered_json& j);
Result<Value> from_json(const nlohmann::json& j);

// What `{{ value }}` prints: strings as-is, none/undefined as "", bools as true/false,
// floats like Python (3.0, 0.1, 1e-07), containers as JSON.
std::string to_output_string(const Value& v);
std::string format_float(double d);

struct JsonOptions {
  std::optional<int> indent;  // pretty-print with this many spaces (0 = compact, as JS)
  bool ensure_ascii = false;  // escape every code unit >= 0x7f as \uXXXX
  bool sort_keys = false;
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool undefined_as_null = true;  // false: undefined prints as `undefined` (to_output_string)
};
// json.dumps as transformers' `tojson` does it: ", " / ": " separators, no key sorting.
Result<std::string> to_json(const Value& v, const JsonOptions& options);

// `==`: numbers/bools numerically, strings by bytes, none == undefined, containers deeply.
bool loose_equals(const Value& a, const Value& b);
// Membership test `x in list`: like loose_equals but a bool never equals a number and none
// never equals undefined (JavaScript ===, which @huggingface/jinja uses for `in`).
bool strict_equals(const Value& a, const Value& b);

}  // namespace kite::jinja
