#include "bench/http_client.h"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <limits>
#include <optional>

namespace kite::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<HttpUrl> parse_http_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    return invalid_argument("--url must start with http:// (got '" + url +
                            "'; https is not supported)");
  std::string rest = url.substr(scheme.size());
  HttpUrl out;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    out.base_path = rest.substr(slash);
    rest.resize(slash);
    while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
    // Request paths already start with /v1; accept the OpenAI-style base URL ".../v1" too.
    if (out.base_path.size() >= 3 && out.base_path.compare(out.base_path.size() - 3, 3, "/v1") == 0)
      out.base_path.resize(out.base_path.size() - 3);
  }
  std::string port_text;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos)
      return invalid_argument("--url '" + url + "' has an unclosed '['");
    out.host = rest.substr(1, close - 1);
    rest.erase(0, close + 1);
    if (!rest.empty() && rest.front() != ':')
      return invalid_argument("--url '" + url + "': junk after ']'");
    if (!rest.empty()) port_text = rest.substr(1);
  } else {
    const size_t colon = rest.find(':');
    out.host = rest.substr(0, colon);
    if (colon != std::string::npos) port_text = rest.substr(colon + 1);
  }
  if (!port_text.empty() || rest.find(':') != std::string::npos) out.port = port_text;
  if (out.host.empty()) return invalid_argument("--url '" + url + "' has no host");
  if (out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("--url '" + url + "' has an invalid port '" + out.port + "'");
  return out;
}

struct HttpClient::Impl {
  asio::io_context io;
  HttpUrl url;
  tcp::resolver::results_type endpoints;
  std::chrono::steady_clock::duration timeout = std::chrono::seconds(600);
};

namespace {

// One request/response exchange on its own connection. Keeps itself alive through the
// shared_ptr captured by each pending handler.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(HttpClient::Impl& client, http::verb verb, std::string target, std::string body,
           StreamHandlers handlers)
      : client_(client), stream_(client.io), handlers_(std::move(handlers)) {
    req_.method(verb);
    req_.target(target);
    req_.version(11);
    req_.set(http::field::host, client.url.host + ":" + client.url.port);
    req_.set(http::field::user_agent, "kite-bench");
    req_.set(http::field::accept, "text/event-stream, application/json");
    req_.keep_alive(false);
    if (verb == http::verb::post) {
      req_.set(http::field::content_type, "application/json");
      req_.body() = std::move(body);
    }
    req_.prepare_payload();
  }

  void start() {
    stream_.expires_after(client_.timeout);
    stream_.async_connect(
        client_.endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
          if (ec)
            return self->fail(
                "cannot connect to " + self->client_.url.host + ":" + self->client_.url.port, ec);
          self->stream_.expires_after(self->client_.timeout);
          http::async_write(self->stream_, self->req_, [self](beast::error_code ec, size_t) {
            if (ec) return self->fail("sending the request", ec);
            self->read_header();
          });
        });
  }

 private:
  void read_header() {
    parser_.emplace();
    // Unlimited. (Not boost::none: Beast 1.74 compares a Content-Length against the optional
    // and treats "none" as smaller than any length.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_after(client_.timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->fail("reading the response header", ec);
                              self->status_ = self->parser_->get().result_int();
                              self->read_body();
                            });
  }

  void read_body() {
    if (parser_->is_done()) return done();
    parser_->get().body().data = chunk_.data();
    parser_->get().body().size = chunk_.size();
    stream_.expires_after(client_.timeout);
    // read_some, not read: a full read would wait until the 16 KiB buffer fills, batching
    // tokens that arrived milliseconds apart into one delivery.
    http::async_read_some(
        stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec == http::error::need_buffer) ec = {};
          const size_t got = self->chunk_.size() - self->parser_->get().body().size;
          if (got > 0) {
            std::string_view bytes(self->chunk_.data(), got);
            if (self->status_ / 100 == 2) {
              if (self->handlers_.on_body) self->handlers_.on_body(bytes);
            } else if (self->error_body_.size() < 4096) {
              self->error_body_.append(bytes);
            }
          }
          if (ec) return self->fail("reading the response body", ec);
          self->read_body();
        });
  }

  void done() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    Status st = ok_status();
    if (status_ / 100 != 2)
      st = Status(status_ == 429 ? ErrorCode::kResourceExhausted : ErrorCode::kInvalidArgument,
                  "HTTP " + std::to_string(status_) + ": " + error_body_.substr(0, 500));
    if (handlers_.on_done) handlers_.on_done(st);
  }

  void fail(const std::string& what, beast::error_code ec) {
    const char* hint = ec == beast::error::timeout ? " (timed out)" : "";
    if (handlers_.on_done)
      handlers_.on_done(Status(ErrorCode::kInternal, what + ": " + ec.message() + hint));
  }

  HttpClient::Impl& client_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::array<char, 16384> chunk_{};
  unsigned status_ = 0;
  std::string error_body_;
  StreamHandlers handlers_;
};

}  // namespace

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

Result<std::unique_ptr<HttpClient>> HttpClient::create(const std::string& url) {
  KITE_ASSIGN_OR_RETURN(HttpUrl parsed, parse_http_url(url));
  auto impl = std::make_unique<Impl>();
  impl->url = parsed;
  tcp::resolver resolver(impl->io);
  beast::error_code ec;
  impl->endpoints = resolver.resolve(parsed.host, parsed.port, ec);
  if (ec) return not_found("cannot resolve '" + parsed.host + "': " + ec.message());
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

const HttpUrl& HttpClient::url() const { return impl_->url; }

void HttpClient::set_timeout(double seconds) {
  impl_->timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

void HttpClient::post(const std::string& path, std::string json_body, StreamHandlers handlers) {
  std::make_shared<Exchange>(*impl_, http::verb::post, impl_->url.base_path + path,
                             std::move(json_body), std::move(handlers))
      ->start();
}

void HttpClient::get(const std::string& path, StreamHandlers handlers) {
  std::make_shared<Exchange>(*impl_, http::verb::get, impl_->url.base_path + path, "",
                             std::move(handlers))
      ->start();
}

void HttpClient::call_after(double delay_s, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(impl_->io);
  timer->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(delay_s, 0.0))));
  timer->async_wait([timer, fn = std::move(fn)](beast::error_code) { fn(); });
}

void HttpClient::run() {
  impl_->io.restart();
  impl_->io.run();
}

}  // namespace kite::bench
