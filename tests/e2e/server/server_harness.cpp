#include "server_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace kite::testing {

std::string kite_binary() {
  std::string path;
  if (const char* env = std::getenv("KITE_BIN"); env && *env)
    path = env;
  else
    path = std::string(KITE_BINARY_DIR) + "/kite";
  return std::filesystem::exists(path) ? path : "";
}

std::unique_ptr<ServerProcess> ServerProcess::start(const std::vector<std::string>& args,
                                                    std::string* error) {
  const std::string bin = kite_binary();
  if (bin.empty()) {
    *error = "the kite binary is not built";
    return nullptr;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = "pipe failed";
    return nullptr;
  }
  std::vector<std::string> argv_s = {bin, "serve", "--port", "0"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
    if (getppid() != parent) _exit(127);
    dup2(fds[1], 2);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  ::close(fds[1]);
  std::unique_ptr<ServerProcess> s(new ServerProcess());
  s->pid_ = pid;
  s->stderr_fd_ = fds[0];
  ServerProcess* self = s.get();
  s->reader_ = std::thread([self] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(self->stderr_fd_, buf, sizeof buf)) > 0) {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->log_.append(buf, static_cast<size_t>(n));
    }
  });
  const std::string marker = "kite: listening on http://127.0.0.1:";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(s->mu_);
      const size_t at = s->log_.find(marker);
      if (at != std::string::npos && s->log_.find('\n', at) != std::string::npos) {
        s->port_ = static_cast<uint16_t>(std::stoi(s->log_.substr(at + marker.size())));
        return s;
      }
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      s->exited_ = true;
      if (s->reader_.joinable()) s->reader_.join();  // the whole log: the pipe is closed now
      *error = "kite serve exited early with status " +
               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ":\n" + s->log();
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *error = "kite serve printed no listening line in 60 s:\n" + s->log();
  return nullptr;
}

ServerProcess::~ServerProcess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
  if (reader_.joinable()) reader_.join();
  if (stderr_fd_ >= 0) ::close(stderr_fd_);
}

std::optional<int> ServerProcess::signal_and_wait(int signo, std::chrono::seconds timeout) {
  kill(pid_, signo);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

std::string ServerProcess::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

Connection::Connection(uint16_t port, std::chrono::milliseconds timeout) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) close();
}

Connection::~Connection() { close(); }

void Connection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Connection::send_all(const std::string& bytes) {
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return sent == bytes.size();
}

bool Connection::recv_more() {
  if (fd_ < 0) return false;
  char buf[16384];
  const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) return false;
  buffer_.append(buf, static_cast<size_t>(n));
  return true;
}

std::string Connection::read_until(const std::string& needle) {
  while (buffer_.find(needle) == std::string::npos && recv_more()) {
  }
  return buffer_;
}

namespace {

// Parses chunked framing from `raw` starting at 0; returns the number of bytes consumed when the
// last chunk was seen, 0 when more bytes are needed, and sets *framing_ok = false on garbage.
size_t dechunk(const std::string& raw, std::string* body, bool* framing_ok) {
  size_t pos = 0;
  body->clear();
  for (;;) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) return 0;
    const std::string size_hex = raw.substr(pos, eol - pos);
    if (size_hex.empty() ||
        size_hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      *framing_ok = false;
      return 0;
    }
    const size_t size = std::stoul(size_hex, nullptr, 16);
    if (size == 0) {
      if (raw.size() < eol + 4) return 0;
      if (raw.compare(eol + 2, 2, "\r\n") != 0) *framing_ok = false;
      return eol + 4;
    }
    if (raw.size() < eol + 2 + size + 2) return 0;
    body->append(raw, eol + 2, size);
    if (raw.compare(eol + 2 + size, 2, "\r\n") != 0) {
      *framing_ok = false;
      return 0;
    }
    pos = eol + 2 + size + 2;
  }
}

}  // namespace

HttpResult Connection::read_response() {
  HttpResult r;
  size_t header_end;
  while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos)
    if (!recv_more()) {
      r.error = "connection closed before the response headers";
      return r;
    }
  std::istringstream head(buffer_.substr(0, header_end));
  std::string line;
  std::getline(head, line);
  if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12) {
    r.error = "bad status line: " + line;
    return r;
  }
  r.status = std::stoi(line.substr(9, 3));
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
  }
  size_t start = header_end + 4;
  if (r.status == 100) {  // interim response: read the real one
    buffer_.erase(0, start);
    return read_response();
  }
  r.chunked = r.headers.count("transfer-encoding") && r.headers["transfer-encoding"] == "chunked";
  if (r.chunked) {
    size_t used;
    while ((used = dechunk(buffer_.substr(start), &r.body, &r.chunk_framing_ok)) == 0 &&
           r.chunk_framing_ok)
      if (!recv_more()) {
        r.error = "connection closed inside the chunked body";
        return r;
      }
    if (!r.chunk_framing_ok) {
      r.error = "bad chunk framing";
      return r;
    }
    r.raw_body = buffer_.substr(start, used);
    buffer_.erase(0, start + used);
  } else if (r.headers.count("content-length")) {
    const size_t len = std::stoul(r.headers["content-length"]);
    while (buffer_.size() < start + len)
      if (!recv_more()) {
        r.error = "connection closed inside the body";
        return r;
      }
    r.body = r.raw_body = buffer_.substr(start, len);
    buffer_.erase(0, start + len);
  } else {
    while (recv_more()) {
    }
    r.body = r.raw_body = buffer_.substr(start);
    buffer_.clear();
  }
  r.ok = true;
  return r;
}

std::string make_request(const std::string& method, const std::string& path,
                         const std::string& body, const std::vector<std::string>& extra_headers,
                         bool keep_alive) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!body.empty() || method == "POST")
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& h : extra_headers) req += h + "\r\n";
  if (!keep_alive) req += "Connection: close\r\n";
  return req + "\r\n" + body;
}

HttpResult http(uint16_t port, const std::string& method, const std::string& path,
                const std::string& body, const std::vector<std::string>& extra_headers) {
  Connection c(port);
  HttpResult r;
  if (!c.connected()) {
    r.error = "connect failed";
    return r;
  }
  if (!c.send_all(make_request(method, path, body, extra_headers))) {
    r.error = "send failed";
    return r;
  }
  return c.read_response();
}

bool parse_sse(const std::string& body, std::vector<std::string>* payloads) {
  size_t pos = 0;
  while (pos < body.size()) {
    if (body.compare(pos, 6, "data: ") != 0) return false;
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) return false;
    const std::string payload = body.substr(pos + 6, end - pos - 6);
    if (payload.find('\n') != std::string::npos) return false;
    payloads->push_back(payload);
    pos = end + 2;
  }
  return true;
}

std::optional<double> metric_value(const std::string& text, const std::string& sample) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  }
  return std::nullopt;
}

}  // namespace kite::testing
