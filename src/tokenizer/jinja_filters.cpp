// Builtin filters (`value | name(args)`).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_text.h"

namespace kite::jinja {
namespace {

const std::set<std::string_view>& known_filters() {
  static const std::set<std::string_view> kNames = {
      "abs",    "bool",       "capitalize", "count",   "default", "dictsort",   "first", "float",
      "indent", "int",        "items",      "join",    "last",    "length",     "list",  "lower",
      "map",    "rejectattr", "replace",    "reverse", "safe",    "selectattr", "sort",  "string",
      "title",  "tojson",     "trim",       "unique",  "upper",   "select",     "reject"};
  return kNames;
}

bool flag_arg(const CallArgs& args, size_t i, std::string_view name, bool fallback) {
  const Value* v = args.get(i, name);
  return v == nullptr ? fallback : v->truthy();
}

// JS parseInt(s, 10) / parseFloat(s): the longest numeric prefix after leading whitespace.
std::optional<double> parse_number_prefix(std::string_view s, bool integer) {
  s = trim_start_js(s);
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (!integer && s.substr(i, 8) == "Infinity") return s[0] == '-' ? -INFINITY : INFINITY;
  auto digits = [&](size_t j) {
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    return j;
  };
  size_t j = digits(i);
  bool any = j > i;
  if (!integer) {
    if (j < s.size() && s[j] == '.') {
      const size_t k = digits(j + 1);
      any = any || k > j + 1;
      j = any ? k : j;
    }
    if (any && j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
      size_t k = j + 1;
      if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
      const size_t e = digits(k);
      if (e > k) j = e;
    }
  }
  if (!any) return std::nullopt;
  return std::strtod(std::string(s.substr(0, j)).c_str(), nullptr);
}

// Dotted attribute path ("a.b", "items.0") through objects, namespaces and arrays.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    if (v.is_object() || v.is_namespace()) {
      const Value* f = v.find(part);
      v = f != nullptr ? *f : Value();
    } else if (v.is_array()) {
      char* end = nullptr;
      const long idx = std::strtol(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || idx < 0 ||
          static_cast<size_t>(idx) >= v.as_array().size())
        return Value();
      v = Value(v.as_array()[static_cast<size_t>(idx)]);
    } else {
      return Value();
    }
    start = dot + 1;
  }
  return v;
}

Result<Value> tojson_filter(const Value& operand, const CallArgs& args) {
  JsonOptions o;
  if (const Value* indent = args.get(0, "indent"); indent != nullptr && !indent->is_none()) {
    if (!indent->is_int()) return invalid_argument("tojson: indent must be an integer");
    o.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
  }
  for (auto [name, field] :
       {std::pair{"ensure_ascii", &o.ensure_ascii}, std::pair{"sort_keys", &o.sort_keys}}) {
    if (const Value* v = args.get(99, name)) {
      if (!v->is_bool())
        return invalid_argument(std::string("tojson: ") + name + " must be a boolean");
      *field = v->as_bool();
    }
  }
  if (const Value* sep = args.get(99, "separators"); sep != nullptr && !sep->is_none()) {
    if (!sep->is_array() || sep->as_array().size() != 2 || !sep->as_array()[0].is_string() ||
        !sep->as_array()[1].is_string()) {
      return invalid_argument("tojson: separators must be a pair of strings");
    }
    o.separators = std::pair{sep->as_array()[0].as_string(), sep->as_array()[1].as_string()};
  }
  KITE_ASSIGN_OR_RETURN(std::string s, to_json(operand, o));
  return Value::string(std::move(s));
}

Result<Value> sort_filter(const Array& items, const CallArgs& args) {
  const bool reverse = flag_arg(args, 0, "reverse", false);
  const bool case_sensitive = flag_arg(args, 1, "case_sensitive", false);
  const Value* attribute = args.get(2, "attribute");
  std::string path;
  if (attribute != nullptr && !attribute->is_none()) {
    if (!attribute->is_string() && !attribute->is_int())
      return invalid_argument("sort: attribute must be a string or integer");
    path = to_output_string(*attribute);
  }
  Array out = items;
  Status failure;
  std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
    auto c = path.empty()
                 ? compare_values(a, b, case_sensitive)
                 : compare_values(attribute_path(a, path), attribute_path(b, path), case_sensitive);
    if (!c.ok()) {
      if (failure.ok()) failure = c.status();
      return false;
    }
    return reverse ? c.value() > 0 : c.value() < 0;
  });
  KITE_RETURN_IF_ERROR(failure);
  return Value::array(std::move(out));
}

Result<Value> select_filter(const Array& items, const CallArgs& args, bool select) {
  for (const Value& item : items) {
    if (!item.is_object() && !item.is_namespace()) {
      return invalid_argument(std::string(select ? "selectattr" : "rejectattr") +
                              " needs a list of mappings");
    }
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return invalid_argument("selectattr/rejectattr need an attribute name");
  }
  const std::string& attr = args.positional[0].as_string();
  const Value* test = args.positional.size() > 1 ? &args.positional[1] : nullptr;
  if (test != nullptr && !test->is_string())
    return invalid_argument("selectattr/rejectattr test name must be a string");
  CallArgs test_args;
  if (args.positional.size() > 2) test_args.positional.push_back(args.positional[2]);
  Array out;
  for (const Value& item : items) {
    const Value* a = item.find(attr);
    bool result = false;
    if (a != nullptr) {
      if (test == nullptr) {
        result = a->truthy();
      } else {
        KITE_ASSIGN_OR_RETURN(result, apply_test(test->as_string(), *a, test_args));
      }
    }
    if (result == select) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Result<Value> map_filter(const Array& items, const CallArgs& args, Env& env) {
  Array out;
  if (const Value* attr = args.get(99, "attribute")) {
    if (!attr->is_string()) return invalid_argument("map: attribute must be a string");
    const Value* fallback = args.get(99, "default");
    for (const Value& item : items) {
      if (!item.is_object() && !item.is_namespace())
        return invalid_argument("map(attribute=...) needs a list of mappings");
      Value v = attribute_path(item, attr->as_string());
      out.push_back(v.is_undefined() && fallback != nullptr ? *fallback : v);
    }
    return Value::array(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return invalid_argument("map needs attribute=... or a filter name");
  }
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    KITE_ASSIGN_OR_RETURN(Value v, apply_filter(args.positional[0].as_string(), item, rest, env));
    out.push_back(std::move(v));
  }
  return Value::array(std::move(out));
}

Result<Value> indent_filter(const std::string& s, const CallArgs& args) {
  std::string pad(4, ' ');
  if (const Value* width = args.get(0, "width")) {
    if (width->is_int()) {
      pad.assign(static_cast<size_t>(std::clamp<int64_t>(width->as_int(), 0, 1024)), ' ');
    } else if (width->is_string()) {
      pad = width->as_string();
    } else {
      return invalid_argument("indent: width must be a number or string");
    }
  }
  const bool first = flag_arg(args, 1, "first", false);
  const bool blank = flag_arg(args, 2, "blank", false);
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t nl = s.find('\n', start);
    const std::string_view text =
        std::string_view(s).substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (!((line == 0 && !first) || (text.empty() && !blank))) out += pad;
    out += text;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return Value::string(std::move(out));
}

Result<Value> sequence_filter(std::string_view name, const Value& v, const CallArgs& args,
                              Env& env) {
  static const std::set<std::string_view> kStringAsSequence = {"first", "last", "list", "reverse",
                                                               "join"};
  if (v.is_string() && !kStringAsSequence.count(name)) return Value();
  // Strings act as sequences of code points here (Python semantics).
  Array chars;
  if (v.is_string()) {
    for (auto& c : split_code_points(v.as_string())) chars.push_back(Value::string(std::move(c)));
  }
  const Array& items = v.is_array() ? v.as_array() : chars;
  if (name == "first") return items.empty() ? Value() : items.front();
  if (name == "last") return items.empty() ? Value() : items.back();
  if (name == "list") return Value::array(items);
  if (name == "reverse") {
    if (v.is_string()) {
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
      return Value::string(std::move(out));
    }
    return Value::array(Array(items.rbegin(), items.rend()));
  }
  if (name == "join") {
    const Value* sep = args.get(0, "d");
    if (sep == nullptr) sep = args.get(99, "separator");
    if (sep != nullptr && !sep->is_string())
      return invalid_argument("join: separator must be a string");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0 && sep != nullptr) out += sep->as_string();
      out += to_output_string(items[i]);
    }
    return Value::string(std::move(out));
  }
  if (!v.is_array()) return Value();
  if (name == "sort") return sort_filter(items, args);
  if (name == "unique") {
    Array out;
    for (const Value& item : items) {
      if (std::none_of(out.begin(), out.end(),
                       [&](const Value& o) { return strict_equals(o, item); }))
        out.push_back(item);
    }
    return Value::array(std::move(out));
  }
  if (name == "selectattr" || name == "rejectattr")
    return select_filter(items, args, name == "selectattr");
  if (name == "map") return map_filter(items, args, env);
  if (name == "select" || name == "reject") {
    // Python Jinja2's select/reject(test, args...) (the JS library lacks them).
    const Value* test = args.positional.empty() ? nullptr : &args.positional[0];
    if (test != nullptr && !test->is_string())
      return invalid_argument("select/reject: the test name must be a string");
    CallArgs test_args;
    if (test != nullptr)
      test_args.positional.assign(args.positional.begin() + 1, args.positional.end());
    Array out;
    for (const Value& item : items) {
      bool pass = item.truthy();
      if (test != nullptr) {
        KITE_ASSIGN_OR_RETURN(pass, apply_test(test->as_string(), item, test_args));
      }
      if (pass == (name == "select")) out.push_back(item);
    }
    return Value::array(std::move(out));
  }
  return Value();
}

Result<Value> string_filter(std::string_view name, const std::string& s, const CallArgs& args) {
  if (name == "upper") return Value::string(ascii_upper(s));
  if (name == "lower") return Value::string(ascii_lower(s));
  if (name == "title") return Value::string(title_case(s));
  if (name == "capitalize") return Value::string(capitalize(s));
  if (name == "trim") {
    const Value* chars = args.get(0, "chars");
    if (chars != nullptr && chars->is_string())
      return Value::string(std::string(strip_chars(s, chars->as_string(), true, true)));
    return Value::string(std::string(trim_js(s)));
  }
  if (name == "indent") return indent_filter(s, args);
  if (name == "replace") return replace_string(s, args);
  return Value();
}

}  // namespace

Result<Value> apply_filter(std::string_view name, const Value& v, const CallArgs& args, Env& env) {
  if (!known_filters().count(name))
    return invalid_argument("unknown filter '" + std::string(name) + "'");
  if (name == "safe") return v;
  if (name == "tojson") return tojson_filter(v, args);
  if (name == "default") {
    const Value* fallback = args.get(0, "default_value");
    const bool boolean = flag_arg(args, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy()))
      return fallback != nullptr ? *fallback : Value::string("");
    return v;
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(static_cast<int64_t>(utf16_length(v.as_string())));
    if (v.is_array()) return Value::integer(static_cast<int64_t>(v.as_array().size()));
    if (v.is_object()) return Value::integer(static_cast<int64_t>(v.as_object().size()));
  }
  if (name == "string" && !v.is_function()) return Value::string(to_output_string(v));
  if (name == "bool") return Value::boolean(v.truthy());
  if (name == "int" || name == "float") {
    const bool to_int = name == "int";
    const Value* fallback = args.get(0, "default");
    Value dflt = fallback != nullptr ? *fallback : to_int ? Value::integer(0) : Value::number(0.0);
    std::optional<double> d;
    if (v.is_string()) d = parse_number_prefix(v.as_string(), to_int);
    if (v.is_number() || v.is_bool()) d = v.as_double();
    if (!v.is_string() && !d)
      return invalid_argument("filter '" + std::string(name) + "' cannot be applied to a " +
                              v.type_name());
    if (!d || std::isnan(*d)) return dflt;
    if (!to_int) return Value::number(*d);
    if (v.is_int()) return v;
    const double f = std::floor(*d);
    if (f >= 9.2e18 || f <= -9.2e18) return Value::number(f);
    return Value::integer(static_cast<int64_t>(f));
  }
  if (name == "abs" && v.is_number()) {
    if (v.is_int())
      return v.as_int() == INT64_MIN ? Value::number(-static_cast<double>(v.as_int()))
                                     : Value::integer(std::llabs(v.as_int()));
    return Value::number(std::fabs(v.as_float()));
  }
  if (v.is_array() || v.is_string()) {
    KITE_ASSIGN_OR_RETURN(Value r, sequence_filter(name, v, args, env));
    if (!r.is_undefined() || name == "first" || name == "last") return r;
  }
  if (v.is_string()) {
    KITE_ASSIGN_OR_RETURN(Value r, string_filter(name, v.as_string(), args));
    if (!r.is_undefined()) return r;
  }
  if (v.is_object()) {
    if (name == "items") return builtin_member(v, "items").as_function()(args, env);
    if (name == "dictsort") return dictsort(v, args);
    if (name == "list") return builtin_member(v, "keys").as_function()(args, env);
  }
  return invalid_argument("filter '" + std::string(name) + "' cannot be applied to a " +
                          v.type_name());
}

}  // namespace kite::jinja
