// Test harness for `kite serve`: starts the real binary on a loopback port chosen by the OS
// (--port 0, the port read from its "kite: listening on" line) and talks to it over plain
// POSIX sockets, so tests see the exact bytes on the wire (status line, chunk framing, SSE).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kite::testing {

// The kite binary: $KITE_BIN, else KITE_BINARY_DIR/kite. Empty when it does not exist.
std::string kite_binary();

class ServerProcess {
 public:
  // Starts `kite serve --port 0 <args>` and waits for its listening line (nullptr on failure,
  // with the reason in *error).
  static std::unique_ptr<ServerProcess> start(const std::vector<std::string>& args,
                                              std::string* error);
  ~ServerProcess();  // SIGKILLs a server still running

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `signo` and waits up to `timeout` for the exit; the exit code, or nullopt on timeout
  // or a death by signal.
  std::optional<int> signal_and_wait(int signo, std::chrono::seconds timeout);
  std::string log() const;

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  uint16_t port_ = 0;
  bool exited_ = false;
  mutable std::mutex mu_;
  std::string log_;
  std::thread reader_;
};

struct HttpResult {
  bool ok = false;    // a complete response was read
  std::string error;  // why not
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string raw_body;                        // as sent on the wire (chunk framing included)
  std::string body;                            // de-chunked
  bool chunked = false;
  bool chunk_framing_ok = true;  // every chunk is "<hex>\r\n<data>\r\n", ending with "0\r\n\r\n"
};

// A client connection (blocking, with a receive timeout).
class Connection {
 public:
  explicit Connection(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~Connection();
  bool connected() const { return fd_ >= 0; }
  bool send_all(const std::string& bytes);
  // Reads one complete response (Content-Length, chunked, or until EOF).
  HttpResult read_response();
  // Reads until `needle` has been received (or EOF/timeout); returns what was read so far.
  std::string read_until(const std::string& needle);
  void close();

 private:
  int fd_ = -1;
  std::string buffer_;
  bool recv_more();
};

std::string make_request(const std::string& method, const std::string& path,
                         const std::string& body,
                         const std::vector<std::string>& extra_headers = {},
                         bool keep_alive = false);

// One request on a fresh connection.
HttpResult http(uint16_t port, const std::string& method, const std::string& path,
                const std::string& body = "", const std::vector<std::string>& extra_headers = {});

// The "data: ..." payloads of an SSE body; false when the body is not a sequence of
// "data: <payload>\n\n" events.
bool parse_sse(const std::string& body, std::vector<std::string>* payloads);

// The value of an unlabelled sample (or one with the exact label set, e.g. `name{reason="x"}`)
// in a Prometheus text body; nullopt when absent.
std::optional<double> metric_value(const std::string& text, const std::string& sample);

}  // namespace kite::testing
