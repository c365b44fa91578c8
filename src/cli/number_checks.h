// Checks for numeric options that say what is wrong in a line. CLI11 2.1's PositiveNumber and
// NonNegativeNumber are ranges up to DBL_MAX, and a value outside them was reported as "Value
// -1 not in range 0.000000 to " followed by all 309 digits of DBL_MAX.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kite::cli {

namespace detail {
inline CLI::Validator number_above(double bound, bool allow_equal, const char* help_name,
                                   const char* wanted) {
  return CLI::Validator(
      [bound, allow_equal, wanted](std::string& in) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(in, v)) return "'" + in + "' is not a number";
        if (v > bound || (allow_equal && v == bound)) return std::string();
        return std::string("must be ") + wanted + ", got " + in;
      },
      help_name);  // what --help shows after the type, as CLI11's own checks
}
}  // namespace detail

// > 0, and >= 0.
inline const CLI::Validator kPositive = detail::number_above(0, false, "POSITIVE", "above 0");
inline const CLI::Validator kNonNegative =
    detail::number_above(0, true, "NONNEGATIVE", "0 or more");

}  // namespace kite::cli
