// Numeric options out of range are refused with one short line naming the option, the value
// and what it must be (CLI11's own range checks printed every digit of DBL_MAX).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/run_command.h"

namespace kite {
namespace {

struct Refusal {
  std::string args, option, wanted;
};

TEST(CliNumberChecks, OutOfRangeValuesGetAShortMessage) {
  const std::string binary = std::string(KITE_BINARY_DIR) + "/kite";
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << binary << " is not built";
  const std::string text = std::string(KITE_SOURCE_DIR) + "/models/kite-tiny/heldout.txt";
  const Refusal cases[] = {
      {"eval --text " + text + " --max-tokens -5", "--max-tokens", "must be 0 or more, got -5"},
      {"bench latency --iters 0", "--iters", "must be above 0, got 0"},
      {"bench latency --iters -1", "--iters", "must be above 0, got -1"},
      {"bench throughput --num-prompts x", "--num-prompts", "'x' is not a number"},
      {"serve --idle-timeout 0", "--idle-timeout", "must be above 0, got 0"},
      {"serve --drain-timeout -1.5", "--drain-timeout", "must be 0 or more, got -1.5"},
  };
  for (const Refusal& c : cases) {
    const auto [status, out] = test_support::run_command(binary + " " + c.args + " 2>&1");
    EXPECT_TRUE(status != -1 && status != 0) << c.args << ": " << out;
    const std::string first = out.substr(0, out.find('\n'));
    EXPECT_NE(first.find(c.option), std::string::npos) << c.args << ": " << out;
    EXPECT_NE(first.find(c.wanted), std::string::npos) << c.args << ": " << out;
    EXPECT_LT(first.size(), 120u) << c.args << ": " << first;
  }
}

}  // namespace
}  // namespace kite
