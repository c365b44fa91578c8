// HttpServer: the HTTP/1.1 front end of `kite serve`, on Boost.Beast + Asio.
//
// Design: one io_context run by a small pool of threads (2 by default). Each connection is one
// C++20 coroutine bound to its own strand — no thread per client — reading requests (keep-
// alive, 100-continue, a body size limit answered with 413, a header size limit with 431), handing
// them to the Router and writing the replies. Generation replies are GenerationJobs: the engine
// thread posts their events onto the connection's strand, and the coroutine sleeps on a timer the
// job cancels when it has bytes to send. SSE streams use chunked transfer, one chunk per wake-up
// (all events ready by then). While a job runs, an async_wait on the socket notices a client that
// hung up (EOF/RST) even when nothing is being written, and the job is cancelled (engine abort).
//
// Shutdown: SIGTERM/SIGINT start a drain — the Router answers new generation requests (and
// /health) with 503, in-flight requests finish — then run() returns once no request is being
// served (or after drain_timeout_s). A second signal stops at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/routes.h"

namespace kite::server {

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: the OS picks a free port (see HttpServer::port())
  int num_threads = 2;
  size_t max_request_body_bytes = 8u << 20;  // larger bodies get 413
  size_t max_header_bytes = 64u << 10;       // a larger request line + headers gets 431
  // A connection must send each complete request (headers and body) within this long of the
  // previous one, or it is closed: an idle keep-alive connection, and a slow client trickling
  // bytes (slowloris), hold a socket no longer than this.
  double idle_timeout_s = 60;
  double write_timeout_s = 60;   // a client that accepts no bytes for this long is dropped
  double drain_timeout_s = 600;  // after a signal, wait at most this long for in-flight requests
};

class HttpServer {
 public:
  // Binds and listens (errors: bad address, port in use) but serves nothing until run().
  static Result<std::unique_ptr<HttpServer>> create(const HttpServerConfig& config, Router* router);
  ~HttpServer();

  uint16_t port() const;  // the bound port (the real one when config.port was 0)

  // Serves on config.num_threads threads (the caller's included) until a drain completes.
  Status run();
  // Starts a drain as SIGTERM does; thread-safe.
  void begin_drain();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kite::server
