// Beast/Asio HTTP/1.1 server: accept loop, per-connection coroutines, SSE streaming, drain;
// see http_server.h for the design.
#include "server/http_server.h"

// GCC 12 misreads Asio's recycling allocator for coroutine frames as a new/delete mismatch.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <csignal>
#include <limits>
#include <thread>
#include <vector>

#include "server/api_error.h"
#include "server/generation_job.h"

namespace kite::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;
using boost::system::error_code;

namespace {

auto seconds(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

// Set by the socket watcher when the client of a running job hung up.
struct Watch {
  bool active = true;  // cleared (on the strand) before the socket may go away
  bool disconnected = false;
};

// Arms a one-shot readiness wait on the socket: EOF or an error means the client is gone.
// Readable data instead is a pipelined next request: leave it for the next read.
void watch_socket(tcp::socket& socket, std::shared_ptr<Watch> watch,
                  std::shared_ptr<asio::steady_timer> wake) {
  socket.async_wait(tcp::socket::wait_read, [&socket, watch, wake](error_code ec) {
    if (!watch->active || ec == asio::error::operation_aborted) return;
    if (!ec) {
      // Never block an io thread: peek without waiting.
      char byte;
      const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0) ec = asio::error::eof;
      if (n < 0) ec = error_code(errno, boost::system::system_category());
    }
    if (ec == asio::error::would_block || ec == asio::error::try_again ||
        ec == asio::error::interrupted) {
      watch_socket(socket, watch, wake);
      return;
    }
    if (ec) {
      watch->disconnected = true;
      wake->cancel();
    }
  });
}

}  // namespace

struct HttpServer::Impl {
  HttpServerConfig config;
  Router* router;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  asio::signal_set signals{ioc, SIGINT, SIGTERM};
  asio::steady_timer drain_timer{ioc};
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> draining{false};
  std::chrono::steady_clock::time_point drain_started;

  awaitable<void> accept_loop();
  awaitable<void> session(beast::tcp_stream stream);
  awaitable<bool> write_response(beast::tcp_stream& stream, const HttpResponse& r, bool keep_alive,
                                 unsigned version);
  awaitable<bool> serve_job(beast::tcp_stream& stream, GenerationJob& job, bool keep_alive,
                            unsigned version);
  awaitable<void> reject_oversized(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                   unsigned version);
  void on_signal(const error_code& ec, int signo);
  void start_drain();
  void poll_drain();
};

awaitable<void> HttpServer::Impl::accept_loop() {
  for (;;) {
    error_code ec;
    auto socket = co_await acceptor.async_accept(asio::make_strand(ioc),
                                                 asio::redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // Out of file descriptors and the like: back off instead of spinning.
      spdlog::warn("accept failed: {}", ec.message());
      asio::steady_timer t(ioc, std::chrono::milliseconds(50));
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto ex = socket.get_executor();
    asio::co_spawn(ex, session(beast::tcp_stream(std::move(socket))), asio::detached);
  }
}

awaitable<bool> HttpServer::Impl::write_response(beast::tcp_stream& stream, const HttpResponse& r,
                                                 bool keep_alive, unsigned version) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  res.set(http::field::server, "kite");
  res.set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) res.set(name, value);
  res.keep_alive(keep_alive);
  res.body() = r.body;
  res.prepare_payload();
  error_code ec;
  stream.expires_after(seconds(config.write_timeout_s));
  co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
  co_return !ec;
}

// 413, then read and drop what the client still sends (bounded), so that it reads the
// answer instead of failing on a reset connection while uploading.
awaitable<void> HttpServer::Impl::reject_oversized(beast::tcp_stream& stream,
                                                   beast::flat_buffer& buffer, unsigned version) {
  co_await write_response(stream, payload_too_large(config.max_request_body_bytes).to_response(),
                          false, version);
  error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::vector<char> sink(64 * 1024);
  size_t dropped = 0;
  stream.expires_after(std::chrono::seconds(5));
  while (!ec && dropped < (256u << 20))
    dropped += co_await stream.async_read_some(asio::buffer(sink),
                                               asio::redirect_error(use_awaitable, ec));
}

awaitable<void> HttpServer::Impl::session(beast::tcp_stream stream) {
  beast::flat_buffer buffer;
  const auto ex = stream.get_executor();
  const Poster post = [ex](std::function<void()> fn) { asio::post(ex, std::move(fn)); };
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(
        std::min<size_t>(config.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
    parser.body_limit(config.max_request_body_bytes);
    error_code ec;
    stream.expires_after(seconds(config.idle_timeout_s));
    co_await http::async_read_header(stream, buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
    const unsigned version = parser.is_header_done() ? parser.get().version() : 11;
    if (!ec && parser.get()[http::field::expect] == "100-continue") {
      http::response<http::empty_body> cont{http::status::continue_, version};
      co_await http::async_write(stream, cont, asio::redirect_error(use_awaitable, ec));
    }
    if (!ec)
      co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::body_limit) {
      co_await reject_oversized(stream, buffer, version);
      break;
    }
    if (ec == http::error::header_limit) {  // the rest of the stream cannot be parsed: close
      co_await write_response(stream, headers_too_large(config.max_header_bytes).to_response(),
                              false, version);
      break;
    }
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted)
      break;
    if (ec) {  // a malformed request: say so, then close (the stream cannot be resynced)
      co_await write_response(stream,
                              bad_request("malformed HTTP request: " + ec.message()).to_response(),
                              false, version);
      break;
    }
    const auto& msg = parser.get();
    HttpRequest req;
    req.method = std::string(msg.method_string().data(), msg.method_string().size());
    const std::string_view target(msg.target().data(), msg.target().size());
    req.path = std::string(target.substr(0, target.find('?')));
    const auto auth = msg[http::field::authorization];
    req.authorization = std::string(auth.data(), auth.size());
    req.body = std::move(parser.get().body());
    const bool keep_alive = msg.keep_alive() && !draining.load();
    ++in_flight;
    Reply reply;
    try {
      reply = router->handle(req, post);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      reply.response = internal(std::string("internal error: ") + e.what()).to_response();
    }
    const bool ok = reply.job
                        ? co_await serve_job(stream, *reply.job, keep_alive, version)
                        : co_await write_response(stream, reply.response, keep_alive, version);
    --in_flight;
    if (!ok || !keep_alive) break;
  }
  error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
}

awaitable<bool> HttpServer::Impl::serve_job(beast::tcp_stream& stream, GenerationJob& job,
                                            bool keep_alive, unsigned version) {
  auto wake = std::make_shared<asio::steady_timer>(stream.get_executor());
  job.set_waker([w = std::weak_ptr<asio::steady_timer>(wake)] {
    if (auto t = w.lock()) t->cancel();
  });
  auto watch = std::make_shared<Watch>();
  watch_socket(stream.socket(), watch, wake);
  auto sleep = [&]() -> awaitable<void> {
    error_code ec;
    stream.expires_never();
    wake->expires_at(asio::steady_timer::time_point::max());
    co_await wake->async_wait(asio::redirect_error(use_awaitable, ec));
  };
  error_code ec;
  bool ok = true;
  if (job.streaming()) {
    const bool chunked = version >= 11;  // HTTP/1.0 has no chunks: the stream ends at close
    http::response<http::empty_body> res{http::status::ok, version};
    res.set(http::field::server, "kite");
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-cache");
    res.keep_alive(keep_alive && chunked);
    res.chunked(chunked);
    http::response_serializer<http::empty_body> sr{res};
    stream.expires_after(seconds(config.write_timeout_s));
    co_await http::async_write_header(stream, sr, asio::redirect_error(use_awaitable, ec));
    ok = !ec;
    while (ok && !watch->disconnected) {
      if (job.has_pending()) {
        const std::string data = job.take_pending();
        stream.expires_after(seconds(config.write_timeout_s));
        if (chunked)
          co_await asio::async_write(stream, http::make_chunk(asio::buffer(data)),
                                     asio::redirect_error(use_awaitable, ec));
        else
          co_await asio::async_write(stream, asio::buffer(data),
                                     asio::redirect_error(use_awaitable, ec));
        ok = !ec;
      } else if (job.done()) {
        break;
      } else {
        co_await sleep();
      }
    }
    ok = ok && !watch->disconnected;
    if (ok && chunked) {
      stream.expires_after(seconds(config.write_timeout_s));
      co_await asio::async_write(stream, http::make_chunk_last(),
                                 asio::redirect_error(use_awaitable, ec));
      ok = !ec;
    }
    ok = ok && chunked && keep_alive;
  } else {
    while (!job.done() && !watch->disconnected) co_await sleep();
    ok = !watch->disconnected &&
         co_await write_response(stream, job.final_response(), keep_alive, version);
  }
  job.set_waker(nullptr);
  if (!job.done()) job.cancel();  // the client went away: free the engine's KV blocks now
  watch->active = false;
  stream.socket().cancel(ec);  // ends the pending readiness wait
  co_return ok;
}

void HttpServer::Impl::on_signal(const error_code& ec, int signo) {
  if (ec) return;
  if (draining.load()) {
    spdlog::warn("second signal {}: stopping now", signo);
    ioc.stop();
    return;
  }
  spdlog::info("signal {}: draining ({} requests in flight; new requests get 503)", signo,
               in_flight.load());
  start_drain();
  signals.async_wait([this](const error_code& e, int s) { on_signal(e, s); });
}

void HttpServer::Impl::start_drain() {
  if (draining.exchange(true)) return;
  router->begin_draining();
  drain_started = std::chrono::steady_clock::now();
  poll_drain();
}

// Polled rather than signalled: requests finish on any strand, and 20 ms is nothing at exit.
void HttpServer::Impl::poll_drain() {
  const bool timed_out =
      std::chrono::steady_clock::now() - drain_started > seconds(config.drain_timeout_s);
  if (in_flight.load() == 0 || timed_out) {
    if (timed_out) spdlog::warn("drain timeout: {} requests still in flight", in_flight.load());
    spdlog::info("drained; shutting down");
    error_code ec;
    acceptor.close(ec);
    signals.cancel(ec);
    ioc.stop();
    return;
  }
  drain_timer.expires_after(std::chrono::milliseconds(20));
  drain_timer.async_wait([this](const error_code& ec) {
    if (!ec) poll_drain();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

Result<std::unique_ptr<HttpServer>> HttpServer::create(const HttpServerConfig& config,
                                                       Router* router) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->router = router;
  error_code ec;
  const auto address = asio::ip::make_address(config.host, ec);
  if (ec)
    return invalid_argument("--host '" + config.host + "' is not an IP address: " + ec.message());
  const tcp::endpoint endpoint(address, config.port);
  auto& a = impl->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status(ErrorCode::kInvalidArgument, "cannot listen on " + config.host + ":" +
                                                   std::to_string(config.port) + ": " +
                                                   ec.message());
  router->set_in_flight_counter(&impl->in_flight);
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const {
  error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::begin_drain() {
  asio::post(impl_->ioc, [impl = impl_.get()] { impl->start_drain(); });
}

Status HttpServer::run() {
  Impl& s = *impl_;
  s.signals.async_wait([&s](const error_code& e, int signo) { s.on_signal(e, signo); });
  asio::co_spawn(s.ioc, s.accept_loop(), asio::detached);
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, s.config.num_threads); ++i)
    threads.emplace_back([&s] { s.ioc.run(); });
  s.ioc.run();
  for (auto& t : threads) t.join();
  return ok_status();
}

}  // namespace kite::server
