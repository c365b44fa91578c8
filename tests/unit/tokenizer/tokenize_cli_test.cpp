// `kite tokenize` end to end: the built binary over a temporary model directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/run_command.h"
#include "tiny_tokenizer.h"

namespace kite {
namespace {

namespace fs = std::filesystem;

using test_support::CommandResult;

// The command with its stderr in the output.
CommandResult run(const std::string& cmd) { return test_support::run_command(cmd + " 2>&1"); }

class TokenizeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = std::string(KITE_BINARY_DIR) + "/kite";
    if (!fs::exists(binary_)) GTEST_SKIP() << binary_ << " is not built";
    dir_ = fs::temp_directory_path() / ("kite_cli_tok_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tokenizer.json") << testing::tiny_tokenizer_json().dump();
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string write_input(const std::string& text) {
    fs::path p = dir_ / "in.jsonl";
    std::ofstream(p) << text;
    return p.string();
  }

  std::string binary_;
  fs::path dir_;
};

TEST_F(TokenizeCliTest, EncodeThenDecode) {
  std::string in = write_input("\"hello world\"\n\"<s>x\"\n");
  CommandResult enc =
      run(binary_ + " tokenize --model " + dir_.string() + " --add-special-tokens < " + in);
  ASSERT_EQ(enc.exit_code, 0) << enc.output;
  EXPECT_EQ(enc.output, "[300,259,260,111,114,108,100]\n[300,300,120]\n");

  std::string ids = write_input("[300,259,260,111,114,108,100]\n");
  CommandResult dec = run(binary_ + " tokenize --decode --model " + dir_.string() + " < " + ids);
  ASSERT_EQ(dec.exit_code, 0) << dec.output;
  EXPECT_EQ(dec.output, "\"<s>hello world\"\n");
}

TEST_F(TokenizeCliTest, BadLineFailsWithLineNumber) {
  std::string in = write_input("\"ok\"\n\"also ok\"\nnot json\n");
  CommandResult r = run(binary_ + " tokenize --model " + dir_.string() + " < " + in);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("line 3"), std::string::npos) << r.output;
}

TEST_F(TokenizeCliTest, MissingTokenizerIsNamed) {
  CommandResult r = run(binary_ + " tokenize --model " + (dir_ / "nope").string() + " < /dev/null");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no tokenizer.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kite
