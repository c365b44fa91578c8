// `kite eval` end to end on the shipped model: exits 0 and its last stdout line is one JSON
// object with the four required keys (the unquantized model against itself: KL 0, agreement 1).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace kite {
namespace {

TEST(EvalCli, LastLineIsJsonWithTheFourKeys) {
  const std::string binary = std::string(KITE_BINARY_DIR) + "/kite";
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << binary << " is not built";
  const std::string model = std::string(KITE_SOURCE_DIR) + "/models/kite-tiny";
  const std::string cmd = binary + " --log-level warn eval --model " + model + " --text " + model +
                          "/heldout.txt --max-tokens 128 --window 64 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const std::string last = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  const nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
  ASSERT_TRUE(j.is_object()) << last;
  for (const char* key : {"perplexity", "reference_perplexity", "kl_divergence", "top1_agreement"})
    ASSERT_TRUE(j.contains(key) && j[key].is_number()) << key << " missing in " << last;
  EXPECT_NEAR(j["kl_divergence"].get<double>(), 0.0, 1e-9);
  EXPECT_EQ(j["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(j["tokens"].get<int64_t>(), 128);
}

}  // namespace
}  // namespace kite
