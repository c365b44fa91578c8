// API-key check for `kite serve --api-key`: clients send `Authorization: Bearer <key>`.
// The comparison takes the same time whatever the supplied value, so response timing does not
// reveal how many leading characters of a guess were right.
#pragma once

#include <string_view>

namespace kite::server {

// True when no key is configured, or `authorization` is "Bearer <key>" with exactly `key`.
bool authorized(std::string_view authorization, std::string_view key);

// Constant-time equality: always reads every byte of `expected`, whatever `given` is.
bool constant_time_equal(std::string_view given, std::string_view expected);

}  // namespace kite::server
