#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_text.h"

namespace kite::jinja {

const Value* CallArgs::get(size_t i, std::string_view name) const {
  if (i < positional.size()) return &positional[i];
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

Value Value::string(std::string s) {
  return Value(Storage(std::make_shared<const std::string>(std::move(s))));
}
Value Value::array(Array a) { return Value(Storage(std::make_shared<const Array>(std::move(a)))); }
Value Value::object(Object o) {
  return Value(Storage(std::make_shared<const Object>(std::move(o))));
}
Value Value::make_namespace(Object fields) {
  return Value(Storage(std::make_shared<Object>(std::move(fields))));
}
Value Value::function(NativeFn fn) {
  return Value(Storage(std::make_shared<const NativeFn>(std::move(fn))));
}

double Value::as_double() const {
  if (is_int()) return static_cast<double>(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  return as_float();
}

const Value* Value::find(std::string_view key) const {
  const Object* fields = nullptr;
  if (is_object()) fields = &as_object();
  if (is_namespace()) fields = &namespace_fields();
  if (fields == nullptr) return nullptr;
  for (const auto& [k, v] : *fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_float() != 0.0 && !std::isnan(as_float());
    case Kind::kString:
      return !as_string().empty();
    case Kind::kArray:
      return !as_array().empty();
    case Kind::kObject:
      return !as_object().empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string Value::type_name() const {
  static const char* const kNames[] = {"undefined", "none",  "bool",   "int",       "float",
                                       "string",    "array", "object", "namespace", "function"};
  return kNames[static_cast<int>(kind())];
}

template <typename J>
static Result<Value> from_json_impl(const J& j, int depth) {
  if (depth > kMaxJsonDepth) {
    return invalid_argument("template context nests deeper than " + std::to_string(kMaxJsonDepth) +
                            " levels");
  }
  switch (j.type()) {
    case J::value_t::null:
      return Value::none();
    case J::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case J::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case J::value_t::number_float:
      return Value::number(j.template get<double>());
    case J::value_t::string:
      return Value::string(j.template get<std::string>());
    case J::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) {
        KITE_ASSIGN_OR_RETURN(Value v, from_json_impl(e, depth + 1));
        a.push_back(std::move(v));
      }
      return Value::array(std::move(a));
    }
    case J::value_t::object: {
      Object o;
      o.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        KITE_ASSIGN_OR_RETURN(Value v, from_json_impl(*it, depth + 1));
        o.emplace_back(it.key(), std::move(v));
      }
      return Value::object(std::move(o));
    }
    default:  // binary, discarded: not producible from a parsed request
      return Value();
  }
}

Result<Value> from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, 0); }
Result<Value> from_json(const nlohmann::json& j) { return from_json_impl(j, 0); }

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then laid out the way Python's repr(float) does.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exp = std::stoi(sci.substr(e_pos + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out += digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp + 1)) + "." +
             digits.substr(static_cast<size_t>(exp + 1));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + exp_buf;
}

std::string to_output_string(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return "";
    case Value::Kind::kBool:
      return v.as_bool() ? "true" : "false";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return format_float(v.as_float());
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kFunction:
      return "<function>";
    default: {
      JsonOptions options;
      options.undefined_as_null = false;
      auto r = to_json(v, options);
      return r.ok() ? r.value() : "";
    }
  }
}

static void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80 || c == 0x7f) {
      size_t len = 0;
      const char32_t cp = decode_utf8(s, i, &len);
      if (!ensure_ascii) {
        out.append(s.substr(i, len));
      } else {
        char buf[16];
        auto put = [&](unsigned u) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out += buf;
        };
        if (cp >= 0x10000) {
          put(0xD800 + ((cp - 0x10000) >> 10));
          put(0xDC00 + ((cp - 0x10000) & 0x3FF));
        } else {
          put(static_cast<unsigned>(cp));
        }
      }
      i += len;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

static Status to_json_impl(const Value& v, const JsonOptions& o, int depth, std::string& out) {
  if (depth > 512) return invalid_argument("tojson: value nested deeper than 512 levels");
  const int indent = o.indent.value_or(0);
  const std::string item_sep = o.separators ? o.separators->first : (indent > 0 ? "," : ", ");
  const std::string key_sep = o.separators ? o.separators->second : ": ";
  const std::string pad =
      indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const std::string child_pad =
      indent > 0 ? pad + std::string(static_cast<size_t>(indent), ' ') : "";
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      out += o.undefined_as_null ? "null" : "undefined";
      return ok_status();
    case Value::Kind::kNone:
      out += "null";
      return ok_status();
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return ok_status();
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return ok_status();
    case Value::Kind::kFloat: {
      const double d = v.as_float();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                             : format_float(d);
      return ok_status();
    }
    case Value::Kind::kString:
      append_json_string(out, v.as_string(), o.ensure_ascii);
      return ok_status();
    case Value::Kind::kArray: {
      const Array& a = v.as_array();
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i > 0) out += item_sep;
        out += child_pad;
        KITE_RETURN_IF_ERROR(to_json_impl(a[i], o, depth + 1, out));
      }
      if (!a.empty()) out += pad;
      out += ']';
      return ok_status();
    }
    case Value::Kind::kObject:
    case Value::Kind::kNamespace: {
      std::vector<const std::pair<std::string, Value>*> entries;
      const Object& fields = v.is_object() ? v.as_object() : v.namespace_fields();
      for (const auto& e : fields) entries.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += item_sep;
        out += child_pad;
        append_json_string(out, entries[i]->first, o.ensure_ascii);
        out += key_sep;
        KITE_RETURN_IF_ERROR(to_json_impl(entries[i]->second, o, depth + 1, out));
      }
      if (!entries.empty()) out += pad;
      out += '}';
      return ok_status();
    }
    case Value::Kind::kFunction:
      return invalid_argument("tojson: cannot convert a function to JSON");
  }
  return ok_status();
}

Result<std::string> to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  KITE_RETURN_IF_ERROR(to_json_impl(v, options, 0, out));
  return out;
}

static bool equals_impl(const Value& a, const Value& b, bool strict, int depth) {
  using K = Value::Kind;
  if (depth > 512) return false;
  const bool a_num = a.is_number() || (!strict && a.is_bool());
  const bool b_num = b.is_number() || (!strict && b.is_bool());
  if (a_num && b_num) return a.as_double() == b.as_double();
  if (a.kind() != b.kind()) {
    const bool a_nil = a.is_none() || a.is_undefined();
    const bool b_nil = b.is_none() || b.is_undefined();
    return !strict && a_nil && b_nil;
  }
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kBool:
      return a.as_bool() == b.as_bool();
    case K::kString:
      return a.as_string() == b.as_string();
    case K::kArray: {
      const Array& x = a.as_array();
      const Array& y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals_impl(x[i], y[i], strict, depth + 1)) return false;
      }
      return true;
    }
    case K::kObject: {
      const Object& x = a.as_object();
      const Object& y = b.as_object();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x) {
        const Value* other = b.find(key);
        if (other == nullptr || !equals_impl(value, *other, strict, depth + 1)) return false;
      }
      return true;
    }
    case K::kNamespace:
      return &a.namespace_fields() == &b.namespace_fields();
    case K::kFunction:
      return &a.as_function() == &b.as_function();
    default:
      return false;
  }
}

bool loose_equals(const Value& a, const Value& b) { return equals_impl(a, b, false, 0); }
bool strict_equals(const Value& a, const Value& b) { return equals_impl(a, b, true, 0); }

}  // namespace kite::jinja
