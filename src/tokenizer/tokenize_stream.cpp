#include "tokenizer/tokenize_stream.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kite {
namespace {

using nlohmann::json;

Status line_error(size_t line_no, const std::string& what) {
  return invalid_argument("stdin line " + std::to_string(line_no) + ": " + what);
}

Result<std::vector<int32_t>> parse_ids(const json& j, size_t line_no) {
  if (!j.is_array()) return line_error(line_no, "expected a JSON array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (const json& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      return line_error(line_no, "token id " + v.dump() + " is not a non-negative integer");
    }
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

}  // namespace

Status run_tokenize_stream(const Tokenizer& tokenizer, std::istream& in, std::ostream& out,
                           const TokenizeStreamOptions& options) {
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return line_error(line_no, "not valid JSON");
    if (options.decode) {
      KITE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, parse_ids(j, line_no));
      out << json(tokenizer.decode(ids, options.skip_special_tokens)).dump() << '\n';
      continue;
    }
    if (!j.is_string())
      return line_error(line_no, "expected a JSON string, got " + std::string(j.type_name()));
    out << json(tokenizer.encode(j.get_ref<const std::string&>(), options.add_special_tokens))
               .dump()
        << '\n';
  }
  out.flush();
  if (!out) return internal_error("cannot write to stdout");
  return ok_status();
}

}  // namespace kite
