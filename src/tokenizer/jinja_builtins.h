// Builtin filters, tests and methods of the Jinja interpreter (see jinja_interpreter.h for
// whose semantics they follow). Each returns an error Status with a plain message; the
// evaluator adds the template line/column.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/jinja_value.h"

namespace kite::jinja {

// `operand | name(args)`. Unknown names and names that do not apply to the operand's kind
// are errors.
Result<Value> apply_filter(std::string_view name, const Value& operand, const CallArgs& args,
                           Env& env);

// `operand is name(args)`.
Result<bool> apply_test(std::string_view name, const Value& operand, const CallArgs& args);

// `object.name` for strings (methods such as startswith, bound to the string), arrays
// (length) and objects (get, items, keys, values, dictsort). Undefined when not a builtin.
Value builtin_member(const Value& object, std::string_view name);

// Python-style slice of an array or string (by code points); `step` may be negative.
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);

// Ordering used by `sort` and `dictsort`: numbers (and bools) numerically, strings
// optionally case-insensitively; other mixes are errors.
Result<int> compare_values(const Value& a, const Value& b, bool case_sensitive);

// Helpers shared by filters and methods.
std::string title_case(std::string_view s);  // JS-style: uppercases each ASCII word start
std::string capitalize(std::string_view s);  // uppercases the first character only
Result<Value> replace_string(const std::string& s, const CallArgs& args);  // (old, new, count)
Result<Value> dictsort(const Value& object, const CallArgs& args);  // (case_sensitive, by, reverse)

}  // namespace kite::jinja
