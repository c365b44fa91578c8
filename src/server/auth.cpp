// Bearer API-key check in constant time; see auth.h.
#include "server/auth.h"

#include <cctype>
#include <cstdint>

namespace kite::server {

bool constant_time_equal(std::string_view given, std::string_view expected) {
  // Length differences are folded into the accumulator instead of returning early; bytes of
  // `given` beyond its end are read as 0 so the loop count depends only on `expected`.
  uint64_t diff = given.size() ^ expected.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

bool authorized(std::string_view authorization, std::string_view key) {
  if (key.empty()) return true;
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() < kScheme.size()) return false;
  // The scheme is case-insensitive (RFC 7235); the token is not.
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i])))
      return false;
  return constant_time_equal(authorization.substr(kScheme.size()), key);
}

}  // namespace kite::server
