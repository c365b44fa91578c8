// Shared pieces of the `kite serve` end-to-end suites: a fixture base that starts one server
// per suite (skipping when the binary is not built), and JSON helpers.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server_harness.h"

namespace kite::testing {

using Json = nlohmann::json;

// Derive, and define `static std::vector<std::string> server_args()` in the derived fixture
// through the template parameter.
template <typename Derived>
class ServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (kite_binary().empty()) return;
    server_ = ServerProcess::start(Derived::server_args(), &error_);
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    if (kite_binary().empty()) GTEST_SKIP() << "build/kite is not built";
    ASSERT_NE(server_, nullptr) << error_;
  }
  static uint16_t port() { return server_->port(); }

  static inline std::unique_ptr<ServerProcess> server_;
  static inline std::string error_;
};

// POSTs `body` and parses the JSON answer (null when it is not JSON).
inline std::pair<int, Json> post_json(uint16_t port, const std::string& path, const Json& body,
                                      const std::vector<std::string>& headers = {}) {
  HttpResult r = http(port, "POST", path, body.dump(), headers);
  return {r.status, Json::parse(r.body, nullptr, false)};
}

// Checks OpenAI's error shape {"error": {"message", "type", "param", "code"}}.
inline void expect_error_shape(const Json& j, const std::string& type) {
  ASSERT_TRUE(j.is_object() && j.contains("error")) << j.dump();
  const Json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << j.dump();
  EXPECT_EQ(e["type"], type) << j.dump();
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << j.dump();
}

inline std::string metrics_text(uint16_t port) { return http(port, "GET", "/metrics").body; }

}  // namespace kite::testing
