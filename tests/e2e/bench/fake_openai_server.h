// A minimal OpenAI-style streaming server for testing `kite bench serve` without the real
// server: Boost.Beast, one thread per connection, SSE over chunked transfer-encoding with
// every event cut across two HTTP chunks (so the client must parse incrementally).
//
// POST /v1/completions | /v1/chat/completions streams max_tokens tokens ("t0", "t1", ...):
// first after first_token_delay_ms, then one per token_delay_ms; then the include_usage chunk
// (if enabled) and "data: [DONE]". GET /v1/models lists "fake-model". Request number k
// (0-based, arrival order) gets HTTP 500 when fail_every > 0 and k % fail_every == fail_every - 1.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace kite::testing {

struct FakeServerOptions {
  int first_token_delay_ms = 20;
  int token_delay_ms = 4;
  bool send_usage = true;
  int fail_every = 0;
};

class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(FakeServerOptions options) : options_(options), acceptor_(io_) {
    namespace asio = boost::asio;
    asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~FakeOpenAiServer() {
    stopping_ = true;
    boost::system::error_code ec;
    // Wake the blocking accept() with a throwaway connection, then close.
    boost::asio::ip::tcp::socket poke(io_);
    poke.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
    accept_thread_.join();
    acceptor_.close(ec);
    std::vector<std::thread> handlers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      handlers.swap(handlers_);
    }
    for (auto& t : handlers) t.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<nlohmann::json> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> targets() {
    std::lock_guard<std::mutex> lock(mu_);
    return targets_;
  }
  int max_concurrent() const { return max_concurrent_.load(); }

 private:
  void accept_loop() {
    while (true) {
      boost::asio::ip::tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (stopping_ || ec) return;
      std::lock_guard<std::mutex> lock(mu_);
      handlers_.emplace_back([this, s = std::move(socket)]() mutable { handle(std::move(s)); });
    }
  }

  static void write_raw(boost::asio::ip::tcp::socket& s, const std::string& bytes) {
    boost::system::error_code ec;
    boost::asio::write(s, boost::asio::buffer(bytes), ec);
  }
  static std::string http_chunk(const std::string& payload) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx", payload.size());
    return std::string(size) + "\r\n" + payload + "\r\n";
  }
  // One SSE event, cut into two HTTP chunks with a pause between them.
  static void send_event(boost::asio::ip::tcp::socket& s, const std::string& data) {
    const std::string event = "data: " + data + "\n\n";
    const size_t cut = event.size() / 3 + 1;
    write_raw(s, http_chunk(event.substr(0, cut)));
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    write_raw(s, http_chunk(event.substr(cut)));
  }

  void handle(boost::asio::ip::tcp::socket socket) {
    namespace http = boost::beast::http;
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> req;
    boost::system::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) return;
    const int now = ++concurrent_;
    for (int prev = max_concurrent_.load();
         now > prev && !max_concurrent_.compare_exchange_weak(prev, now);) {
    }
    const std::string target(req.target());
    if (req.method() == http::verb::get) {
      const std::string body = R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})";
      finish(socket, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    } else {
      stream(socket, target, req.body());
    }
    socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  }

  void stream(boost::asio::ip::tcp::socket& socket, const std::string& target,
              const std::string& text) {
    auto body = nlohmann::json::parse(text, nullptr, false);
    int k;
    {
      std::lock_guard<std::mutex> lock(mu_);
      k = static_cast<int>(bodies_.size());
      bodies_.push_back(body);
      targets_.push_back(target);
    }
    if (options_.fail_every > 0 && k % options_.fail_every == options_.fail_every - 1) {
      const std::string err =
          R"({"error":{"message":"injected failure","type":"InternalServerError"}})";
      finish(socket,
             "HTTP/1.1 500 Internal Server Error\r\nContent-Type: "
             "application/json\r\nContent-Length: " +
                 std::to_string(err.size()) + "\r\nConnection: close\r\n\r\n" + err);
      return;
    }
    const bool chat = target == "/v1/chat/completions";
    const int n = body.value("max_tokens", 1);
    write_raw(socket,
              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
              "Connection: close\r\n\r\n");
    if (chat)
      send_event(
          socket,
          R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})");
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.first_token_delay_ms));
    for (int i = 0; i < n; ++i) {
      if (i) std::this_thread::sleep_for(std::chrono::milliseconds(options_.token_delay_ms));
      nlohmann::json choice = {
          {"index", 0},
          {"finish_reason", i + 1 == n ? nlohmann::json("length") : nlohmann::json()}};
      const std::string piece = "t" + std::to_string(i);
      if (chat)
        choice["delta"] = {{"content", piece}};
      else
        choice["text"] = piece;
      send_event(socket, nlohmann::json{{"id", "x"}, {"choices", {choice}}}.dump());
    }
    if (options_.send_usage) {
      const int prompt = body.contains("prompt") && body["prompt"].is_array()
                             ? static_cast<int>(body["prompt"].size())
                             : 7;
      send_event(socket,
                 nlohmann::json{{"choices", nlohmann::json::array()},
                                {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", n}}}}
                     .dump());
    }
    send_event(socket, "[DONE]");
    finish(socket, "0\r\n\r\n");
  }

  // Writes the last bytes of a response. The exchange stops counting as concurrent first:
  // the client may start its next request the moment these bytes arrive.
  void finish(boost::asio::ip::tcp::socket& socket, const std::string& last_bytes) {
    --concurrent_;
    write_raw(socket, last_bytes);
  }

  FakeServerOptions options_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<std::thread> handlers_;
  std::vector<nlohmann::json> bodies_;
  std::vector<std::string> targets_;
  std::atomic<int> concurrent_{0}, max_concurrent_{0};
};

}  // namespace kite::testing
