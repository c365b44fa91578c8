// HttpClient: a small asynchronous HTTP/1.1 client (Boost.Beast over Asio) for the serving
// benchmark. One io_context, one thread: every connection, timer and callback runs on the
// thread inside run(), so thousands of concurrent streams cost sockets, not threads.
//
// Each request opens its own connection ("Connection: close"), so a slow stream never
// delays another. Response bodies are handed to the caller as they arrive (chunked
// transfer-encoding already removed), which is what an SSE consumer needs. Plain http://
// only (benchmarks talk to a local or in-cluster server).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kite::bench {

struct HttpUrl {
  std::string host;
  std::string port = "80";
  std::string base_path;  // without a trailing '/', prefixed to every request path
};

// "http://host[:port][/base]" (IPv6 hosts in brackets); a trailing "/v1" on the base is
// dropped since request paths carry it. https and other schemes are refused with a message.
Result<HttpUrl> parse_http_url(const std::string& url);

struct StreamHandlers {
  // Body bytes of a 2xx reply, in order, as they arrive.
  std::function<void(std::string_view bytes)> on_body;
  // Called once when the exchange ends: OK after a complete 2xx reply, else the connection
  // error or "HTTP <status>: <body>".
  std::function<void(const Status& status)> on_done;
};

class HttpClient {
 public:
  // Resolves the host now (a wrong URL fails here, before any timing starts).
  static Result<std::unique_ptr<HttpClient>> create(const std::string& url);
  ~HttpClient();

  // Seconds any single read, write or connect may take before the request fails.
  void set_timeout(double seconds);
  // POST `json_body` to base_path + path (Content-Type: application/json).
  void post(const std::string& path, std::string json_body, StreamHandlers handlers);
  void get(const std::string& path, StreamHandlers handlers);
  // Runs `fn` on the client's thread after `delay_s` (<= 0: as soon as possible).
  void call_after(double delay_s, std::function<void()> fn);
  // Runs until no request or timer is left; may be called again after more work is added.
  void run();

  const HttpUrl& url() const;

  struct Impl;  // io_context, resolved endpoints (http_client.cpp)

 private:
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kite::bench
