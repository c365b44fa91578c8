// Plain HTTP request/response values shared by the router and the Beast-based HTTP layer, so
// that only http_server.cpp includes Boost (Beast headers are slow to compile).
//
// Routes take an HttpRequest and return a Reply: either a complete HttpResponse, or a
// GenerationJob whose output the HTTP layer streams (SSE) or sends when it is done.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kite::server {

class GenerationJob;

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string path;           // the target without its query string
  std::string authorization;  // the Authorization header, verbatim ("" when absent)
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Allow, ...)
};

struct Reply {
  HttpResponse response;               // used when job is null
  std::shared_ptr<GenerationJob> job;  // a generation in flight
};

// Runs `fn` on the executor of the connection that made a request (an Asio strand). Engine
// callbacks use it to hand their events to the connection without blocking the engine thread.
using Poster = std::function<void(std::function<void()>)>;

}  // namespace kite::server
