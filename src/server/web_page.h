// The browser UI served at GET / : one self-contained HTML file (inline CSS and JS, no external
// resources), src/server/web/index.html, embedded into the binary at build time by
// cmake/embed_file.cmake. The page talks to the same server through /v1/chat/completions
// (streaming), /v1/models and /metrics, sending the API key as a Bearer token when one is set.
#pragma once

#include <string_view>

namespace kite {

// The page's bytes (UTF-8 HTML), valid for the life of the process. Serve as
// "text/html; charset=utf-8".
std::string_view web_index_html();

}  // namespace kite
