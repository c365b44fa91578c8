// `kite eval` end to end on the shipped model: exits 0 and its last stdout line is one JSON
// object with the four required keys (the unquantized model against itself: KL 0, agreement 1);
// a method that needs a calibration text, given none, fails before any model is loaded, as does
// a text or calibration text that is empty or not UTF-8, and a quantization the checkpoint rules
// out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/run_command.h"

namespace kite {
namespace {

using test_support::run_command;

// Every test runs the kite binary on the shipped model, and is skipped where it is not built.
class EvalCli : public testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(binary)) GTEST_SKIP() << binary << " is not built";
  }

  // Runs `kite ARGS` and expects it to fail, saying `message`, before it has loaded any model
  // (the loader logs "loaded ..." at info level).
  void expect_refused_before_loading(const std::string& args, const std::string& message) const {
    auto [status, out] = run_command(binary + " --log-level info " + args + " 2>&1");
    EXPECT_NE(status, 0) << args << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << args << "\n" << out;
    EXPECT_EQ(out.find("loaded "), std::string::npos) << args << " loaded a model first:\n" << out;
  }

  const std::string binary = std::string(KITE_BINARY_DIR) + "/kite";
  const std::string model = std::string(KITE_SOURCE_DIR) + "/models/kite-tiny";
};

TEST_F(EvalCli, LastLineIsJsonWithTheFourKeys) {
  const std::string cmd = binary + " --log-level warn eval --model " + model + " --text " + model +
                          "/heldout.txt --max-tokens 128 --window 64 2>/dev/null";
  auto [status, out] = run_command(cmd);
  ASSERT_EQ(status, 0) << out;
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

// Before, kite eval loaded its unquantized reference (and logged "loaded ...") and only then
// said that awq needs a calibration text, in words that spoke of evaluating in kite quantize too.
TEST_F(EvalCli, CalibratingMethodsWithoutATextFailBeforeLoading) {
  const std::string out_dir = testing::TempDir() + "/kite_quantize_no_calibration";
  for (const std::string& args :
       {"eval --model " + model + " --text " + model + "/heldout.txt --quantization awq",
        "eval --model " + model + " --text " + model + "/heldout.txt --quantization int8",
        "quantize --model " + model + " --method awq --out " + out_dir}) {
    const std::string method = args.find("int8") != std::string::npos ? "int8" : "awq";
    expect_refused_before_loading(args, method + " quantization needs --calibration-text FILE");
  }
  EXPECT_FALSE(std::filesystem::exists(out_dir)) << "kite quantize wrote " << out_dir;
}

// A text that is not UTF-8 was scored as the tokenizer's U+FFFD replacements, and an empty or
// non-UTF-8 calibration text was found only after kite eval had loaded its reference model (for
// FP8 KV scales, after the model too). kite quantize refuses one before it writes anything.
TEST_F(EvalCli, TextsThatAreNotUtf8OrEmptyFailBeforeLoading) {
  const std::string latin1 = testing::TempDir() + "/kite_eval_latin1.txt";
  const std::string empty = testing::TempDir() + "/kite_eval_empty.txt";
  std::ofstream(latin1, std::ios::binary) << "caf\xc3\xa9 ok\nna\xefve\n";  // line 2: 0xEF 'v'
  std::ofstream(empty, std::ios::binary).flush();
  const std::string heldout = model + "/heldout.txt";
  const std::string out_dir = testing::TempDir() + "/kite_quantize_latin1_calibration";
  const std::string not_utf8 = "is not UTF-8: byte 0xEF at offset 11 (line 2)";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"eval --text " + latin1, "text file '" + latin1 + "' " + not_utf8},
           {"eval --text " + heldout + " --quantization int8 --calibration-text " + latin1,
            "text file '" + latin1 + "' " + not_utf8},
           {"eval --text " + heldout + " --quantization awq --calibration-text " + empty,
            "text file '" + empty + "' is empty"},
           {"eval --text " + heldout + " --kv-cache-dtype fp8 --calibration-text " + latin1,
            "text file '" + latin1 + "' " + not_utf8},
           {"quantize --method awq --out " + out_dir + " --calibration-text " + latin1,
            "text file '" + latin1 + "' " + not_utf8}}) {
    expect_refused_before_loading(args + " --model " + model, message);
  }
  EXPECT_FALSE(std::filesystem::exists(out_dir)) << "kite quantize wrote " << out_dir;
}

// --quantization on a checkpoint that is already quantized was refused only once kite eval had
// loaded the unquantized reference.
TEST_F(EvalCli, AQuantizationTheCheckpointRulesOutFailsBeforeLoading) {
  const std::string int4 = testing::TempDir() + "/kite_eval_int4_checkpoint";
  std::filesystem::remove_all(int4);
  auto [qstatus, qout] = run_command(binary + " --log-level warn quantize --model " + model +
                                     " --method int4 --out " + int4 + " 2>&1");
  ASSERT_EQ(qstatus, 0) << qout;
  expect_refused_before_loading(
      "eval --model " + int4 + " --text " + model + "/heldout.txt --quantization fp8",
      int4 + " is already a quantized checkpoint; load it without --quantization fp8");
  std::filesystem::remove_all(int4);
}

}  // namespace
}  // namespace kite
