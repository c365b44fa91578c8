// Builtin tests, methods, globals and slicing (filters are in jinja_filters.cpp).
#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <ctime>

#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_text.h"

namespace kite::jinja {
namespace {

// Optional string argument: absent or none -> nullptr, a string -> it, else an error.
Result<const std::string*> optional_string(const CallArgs& args, size_t i, std::string_view name) {
  const Value* v = args.get(i, name);
  if (v == nullptr || v->is_none() || v->is_undefined())
    return static_cast<const std::string*>(nullptr);
  if (!v->is_string())
    return invalid_argument(std::string(name) + " must be a string, got a " + v->type_name());
  return &v->as_string();
}

Result<Value> affix_test(const std::string& s, const CallArgs& args, bool prefix) {
  const char* fname = prefix ? "startswith" : "endswith";
  if (args.positional.empty()) return invalid_argument(std::string(fname) + "() needs an argument");
  auto matches = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0
                  : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  const Value& pattern = args.positional[0];
  if (pattern.is_string()) return Value::boolean(matches(pattern.as_string()));
  if (pattern.is_array()) {
    for (const Value& p : pattern.as_array()) {
      if (!p.is_string())
        return invalid_argument(std::string(fname) + "() tuple elements must be strings");
      if (matches(p.as_string())) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  return invalid_argument(std::string(fname) +
                          "() argument must be a string or a tuple of strings");
}

// Python str.split(sep=None, maxsplit=-1).
Result<Value> split_string(const std::string& s, const CallArgs& args) {
  KITE_ASSIGN_OR_RETURN(const std::string* sep, optional_string(args, 0, "sep"));
  int64_t maxsplit = -1;
  if (const Value* m = args.get(1, "maxsplit")) {
    if (!m->is_int()) return invalid_argument("split() maxsplit must be an integer");
    maxsplit = m->as_int();
  }
  Array parts;
  if (sep == nullptr) {
    const std::string_view text = trim_start_js(s);
    size_t i = 0;
    while (i < text.size()) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        parts.push_back(Value::string(std::string(text.substr(i))));
        break;
      }
      size_t j = i;
      while (j < text.size() && js_space_len_at(text, j) == 0) {
        size_t len = 0;
        decode_utf8(text, j, &len);
        j += len;
      }
      parts.push_back(Value::string(std::string(text.substr(i, j - i))));
      i = j;
      while (size_t n = js_space_len_at(text, i)) i += n;
    }
    return Value::array(std::move(parts));
  }
  if (sep->empty()) return invalid_argument("split() separator is empty");
  size_t start = 0;
  while (true) {
    const bool limit = maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit;
    const size_t hit = limit ? std::string::npos : s.find(*sep, start);
    if (hit == std::string::npos) {
      parts.push_back(Value::string(s.substr(start)));
      break;
    }
    parts.push_back(Value::string(s.substr(start, hit - start)));
    start = hit + sep->size();
  }
  return Value::array(std::move(parts));
}

}  // namespace

// Python str.replace(old, new, count=-1); an empty `old` inserts between code points.
Result<Value> replace_string(const std::string& s, const CallArgs& args) {
  const Value* old_v = args.get(0, "old");
  const Value* new_v = args.get(1, "new");
  if (old_v == nullptr || new_v == nullptr)
    return invalid_argument("replace() needs two arguments");
  if (!old_v->is_string() || !new_v->is_string())
    return invalid_argument("replace() arguments must be strings");
  int64_t count = -1;
  if (const Value* c = args.get(2, "count"); c != nullptr && !c->is_none()) {
    if (!c->is_int()) return invalid_argument("replace() count must be an integer");
    count = c->as_int();
  }
  const std::string& from = old_v->as_string();
  const std::string& to = new_v->as_string();
  std::string out;
  size_t i = 0;
  int64_t done = 0;
  if (from.empty()) {
    for (const std::string& cp : split_code_points(s)) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += cp;
    }
    if (count < 0 || done < count) out += to;
    return Value::string(std::move(out));
  }
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, i);
    if (hit == std::string::npos) break;
    out.append(s, i, hit - i);
    out += to;
    i = hit + from.size();
    ++done;
  }
  out.append(s, i);
  return Value::string(std::move(out));
}

namespace {

Value string_method(const Value& self, std::string_view name) {
  const std::string& s = self.as_string();
  auto method = [&](auto body) {
    return Value::function([self, body](const CallArgs& args, Env&) -> Result<Value> {
      return body(self.as_string(), args);
    });
  };
  if (name == "length") return Value::integer(static_cast<int64_t>(utf16_length(s)));
  if (name == "upper")
    return method([](const std::string& v, const CallArgs&) -> Result<Value> {
      return Value::string(ascii_upper(v));
    });
  if (name == "lower")
    return method([](const std::string& v, const CallArgs&) -> Result<Value> {
      return Value::string(ascii_lower(v));
    });
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip";
    const bool right = name != "lstrip";
    return method([left, right](const std::string& v, const CallArgs& args) -> Result<Value> {
      KITE_ASSIGN_OR_RETURN(const std::string* chars, optional_string(args, 0, "chars"));
      if (chars != nullptr) return Value::string(std::string(strip_chars(v, *chars, left, right)));
      std::string_view r = v;
      if (left) r = trim_start_js(r);
      if (right) r = trim_end_js(r);
      return Value::string(std::string(r));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([prefix](const std::string& v, const CallArgs& args) {
      return affix_test(v, args, prefix);
    });
  }
  if (name == "split")
    return method([](const std::string& v, const CallArgs& args) { return split_string(v, args); });
  if (name == "replace")
    return method(
        [](const std::string& v, const CallArgs& args) { return replace_string(v, args); });
  if (name == "title" || name == "capitalize") {
    const bool title = name == "title";
    return method([title](const std::string& v, const CallArgs&) -> Result<Value> {
      return Value::string(title ? title_case(v) : capitalize(v));
    });
  }
  return Value();
}

}  // namespace

std::string title_case(std::string_view s) {
  // JS /\b\w/g: uppercase an ASCII word character that starts a word; the rest is kept.
  std::string out(s);
  auto word = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  for (size_t i = 0; i < out.size(); ++i) {
    if (word(out[i]) && (i == 0 || !word(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z')
      out[i] -= 32;
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] -= 32;
  return out;
}

Result<Value> dictsort(const Value& object, const CallArgs& args) {
  const Value* cs = args.get(0, "case_sensitive");
  const Value* by = args.get(1, "by");
  const Value* reverse = args.get(2, "reverse");
  if (cs != nullptr && !cs->is_bool())
    return invalid_argument("dictsort: case_sensitive must be a boolean");
  if (by != nullptr &&
      (!by->is_string() || (by->as_string() != "key" && by->as_string() != "value"))) {
    return invalid_argument("dictsort: by must be 'key' or 'value'");
  }
  if (reverse != nullptr && !reverse->is_bool())
    return invalid_argument("dictsort: reverse must be a boolean");
  const bool case_sensitive = cs != nullptr && cs->as_bool();
  const bool by_value = by != nullptr && by->as_string() == "value";
  const bool descending = reverse != nullptr && reverse->as_bool();
  Array items;
  for (const auto& [k, v] : object.as_object())
    items.push_back(Value::array({Value::string(k), v}));
  Status failure;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    auto c = compare_values(a.as_array()[by_value], b.as_array()[by_value], case_sensitive);
    if (!c.ok()) {
      if (failure.ok()) failure = c.status();
      return false;
    }
    return descending ? c.value() > 0 : c.value() < 0;
  });
  KITE_RETURN_IF_ERROR(failure);
  return Value::array(std::move(items));
}

Value builtin_member(const Value& object, std::string_view name) {
  if (object.is_string()) return string_method(object, name);
  if (object.is_array()) {
    return name == "length" ? Value::integer(static_cast<int64_t>(object.as_array().size()))
                            : Value();
  }
  if (!object.is_object()) return Value();
  if (name == "get") {
    return Value::function([object](const CallArgs& args, Env&) -> Result<Value> {
      if (args.positional.empty() || !args.positional[0].is_string()) {
        return invalid_argument("get() needs a string key");
      }
      if (const Value* v = object.find(args.positional[0].as_string())) return *v;
      return args.positional.size() > 1 ? args.positional[1] : Value::none();
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
    return Value::function([object, which](const CallArgs&, Env&) -> Result<Value> {
      Array out;
      for (const auto& [k, v] : object.as_object()) {
        out.push_back(which == 0   ? Value::array({Value::string(k), v})
                      : which == 1 ? Value::string(k)
                                   : v);
      }
      return Value::array(std::move(out));
    });
  }
  if (name == "dictsort") {
    return Value::function([object](const CallArgs& args, Env&) { return dictsort(object, args); });
  }
  return Value();
}

Value slice_value(const Value& object, const Value& start_v, const Value& stop_v,
                  const Value& step_v) {
  std::vector<std::string> chars;
  const Array* arr = nullptr;
  if (object.is_string()) {
    chars = split_code_points(object.as_string());
  } else {
    arr = &object.as_array();
  }
  const int64_t len = static_cast<int64_t>(arr != nullptr ? arr->size() : chars.size());
  const int64_t step = step_v.is_int() ? step_v.as_int() : 1;
  int64_t start = 0;
  int64_t stop = 0;
  // Mirrors @huggingface/jinja's slice(); step 0 gives an empty result.
  if (step >= 0) {
    start = start_v.is_int() ? start_v.as_int() : 0;
    stop = stop_v.is_int() ? stop_v.as_int() : len;
    start = start < 0 ? std::max<int64_t>(len + start, 0) : std::min(start, len);
    stop = stop < 0 ? std::max<int64_t>(len + stop, 0) : std::min(stop, len);
  } else {
    start = start_v.is_int() ? start_v.as_int() : len - 1;
    stop = stop_v.is_int() ? stop_v.as_int() : -1;
    start = start < 0 ? std::max<int64_t>(len + start, -1) : std::min(start, len - 1);
    stop = stop < -1 ? std::max<int64_t>(len + stop, -1) : std::min(stop, len - 1);
  }
  const int64_t dir = step > 0 ? 1 : step < 0 ? -1 : 0;
  Array out_arr;
  std::string out_str;
  for (int64_t i = start; dir * i < dir * stop; i += step) {
    if (arr != nullptr) {
      out_arr.push_back((*arr)[static_cast<size_t>(i)]);
    } else {
      out_str += chars[static_cast<size_t>(i)];
    }
  }
  return arr != nullptr ? Value::array(std::move(out_arr)) : Value::string(std::move(out_str));
}

Result<int> compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if ((a.is_none() && b.is_none()) || (a.is_undefined() && b.is_undefined())) return 0;
  const bool a_num = a.is_number() || a.is_bool();
  const bool b_num = b.is_number() || b.is_bool();
  if (a_num && b_num) {
    const double x = a.as_double();
    const double y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const std::string x = case_sensitive ? a.as_string() : ascii_lower(a.as_string());
    const std::string y = case_sensitive ? b.as_string() : ascii_lower(b.as_string());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return invalid_argument("cannot compare a " + a.type_name() + " with a " + b.type_name());
}

Result<bool> apply_test(std::string_view name, const Value& v, const CallArgs& args) {
  using K = Value::Kind;
  const Value* arg = args.get(0, "value");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_array() || v.is_string();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "callable") return v.is_function();
  if (name == "lower") return v.is_string() && ascii_lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && ascii_upper(v.as_string()) == v.as_string();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) return invalid_argument("test '" + std::string(name) + "' needs an integer");
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    if (!v.is_int() || arg == nullptr || !arg->is_int() || arg->as_int() == 0) {
      return invalid_argument("test 'divisibleby' needs a nonzero integer argument");
    }
    return v.as_int() % arg->as_int() == 0;
  }
  if (name == "equalto" || name == "eq" || name == "sameas") {
    if (arg == nullptr)
      return invalid_argument("test '" + std::string(name) + "' needs an argument");
    return v.kind() != K::kArray && v.kind() != K::kObject ? strict_equals(v, *arg)
                                                           : loose_equals(v, *arg);
  }
  if (name == "ne") return arg != nullptr && !loose_equals(v, *arg);
  if (name == "in")
    return arg != nullptr && arg->is_array() &&
           std::any_of(arg->as_array().begin(), arg->as_array().end(),
                       [&](const Value& e) { return strict_equals(v, e); });
  return invalid_argument("unknown test '" + std::string(name) + "'");
}

static Result<Value> range_fn(const CallArgs& args, Env&) {
  for (const Value& a : args.positional) {
    if (!a.is_int()) return invalid_argument("range() arguments must be integers");
  }
  if (args.positional.empty() || args.positional.size() > 3)
    return invalid_argument("range() takes 1 to 3 arguments");
  int64_t start = 0;
  int64_t stop = args.positional[0].as_int();
  int64_t step = 1;
  if (args.positional.size() >= 2) {
    start = stop;
    stop = args.positional[1].as_int();
  }
  if (args.positional.size() == 3) step = args.positional[2].as_int();
  if (step == 0) return invalid_argument("range() step must not be zero");
  constexpr int64_t kMaxRange = 1'000'000;
  Array out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange)
      return invalid_argument("range() longer than 1000000 items");
    out.push_back(Value::integer(i));
  }
  return Value::array(std::move(out));
}

static Result<Value> namespace_fn(const CallArgs& args, Env&) {
  if (args.positional.size() > 1)
    return invalid_argument("namespace() takes at most 1 positional argument");
  Object fields;
  auto put = [&](const std::string& k, const Value& v) {
    for (auto& [key, value] : fields) {
      if (key == k) {
        value = v;
        return;
      }
    }
    fields.emplace_back(k, v);
  };
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (!src.is_object())
      return invalid_argument("namespace() positional argument must be a mapping");
    for (const auto& [k, v] : src.as_object()) put(k, v);
  }
  for (const auto& [k, v] : args.keyword) put(k, v);
  return Value::make_namespace(std::move(fields));
}

static Result<Value> raise_exception_fn(const CallArgs& args, Env&) {
  const std::string message = args.positional.empty() ? "" : to_output_string(args.positional[0]);
  return invalid_argument("raise_exception(): " + message);
}

static Result<Value> strftime_now_fn(const CallArgs& args, Env&) {
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return invalid_argument("strftime_now() needs a format string");
  }
  static const char* const kMonths[] = {"January",   "February", "March",    "April",
                                        "May",       "June",     "July",     "August",
                                        "September", "October",  "November", "December"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  const std::string& fmt = args.positional[0].as_string();
  std::string out;
  auto pad2 = [](int n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out += fmt[i];
      continue;
    }
    const char c = fmt[++i];
    switch (c) {
      case 'Y':
        out += std::to_string(tm.tm_year + 1900);
        break;
      case 'm':
        out += pad2(tm.tm_mon + 1);
        break;
      case 'd':
        out += pad2(tm.tm_mday);
        break;
      case 'b':
        out += std::string(kMonths[tm.tm_mon]).substr(0, 3);
        break;
      case 'B':
        out += kMonths[tm.tm_mon];
        break;
      case 'H':
        out += pad2(tm.tm_hour);
        break;
      case 'M':
        out += pad2(tm.tm_min);
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += c;
    }
  }
  return Value::string(std::move(out));
}

void install_globals(Env& env) {
  env.set("true", Value::boolean(true));
  env.set("false", Value::boolean(false));
  env.set("none", Value::none());
  env.set("True", Value::boolean(true));
  env.set("False", Value::boolean(false));
  env.set("None", Value::none());
  env.set("range", Value::function(range_fn));
  env.set("namespace", Value::function(namespace_fn));
  env.set("raise_exception", Value::function(raise_exception_fn));
  env.set("strftime_now", Value::function(strftime_now_fn));
}

}  // namespace kite::jinja
