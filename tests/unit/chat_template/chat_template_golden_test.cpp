// Byte-for-byte agreement with @huggingface/jinja on real chat templates and on the
// one-feature templates. Goldens are made by tools/fixtures/chat_template/make_goldens.mjs.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/chat_template.h"

namespace kite {
namespace {

using nlohmann::ordered_json;

ordered_json load_golden(const std::string& name) {
  const std::string path =
      std::string(KITE_SOURCE_DIR) + "/tools/fixtures/chat_template/goldens/" + name + ".json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing golden file " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

// Shows where two renders first differ, with a little context on each side.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) +
         "\n  want: " + ordered_json(want.substr(from, 100)).dump() +
         "\n  got:  " + ordered_json(got.substr(from, 100)).dump();
}

class ChatTemplateGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGoldenTest, MatchesHuggingFaceJinja) {
  const ordered_json golden = load_golden(GetParam());
  // from_tokenizer_config takes the config as the file holds it (AddedToken objects too).
  const auto config = nlohmann::json::parse(golden["tokenizer_config"].dump());
  auto tmpl = ChatTemplate::from_tokenizer_config(config);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
  const ordered_json& cases = golden["cases"];
  ASSERT_GE(cases.size(), 40u);
  int errors = 0;
  for (const ordered_json& c : cases) {
    const std::string name = c["name"].get<std::string>();
    auto rendered = tmpl->render(c["context"]);
    if (c.contains("error")) {
      ++errors;
      EXPECT_FALSE(rendered.ok()) << name << ": the reference renderer fails (" << c["error"]
                                  << ") but kite rendered "
                                  << ordered_json(rendered.value()).dump();
      continue;
    }
    ASSERT_TRUE(rendered.ok()) << name << ": " << rendered.status().message();
    const std::string want = c["expected"].get<std::string>();
    EXPECT_EQ(rendered.value(), want) << name << ": " << first_difference(want, rendered.value());
  }
  // Most cases must produce a prompt, or the comparison proves little.
  EXPECT_LT(errors, static_cast<int>(cases.size()) / 4);
}

INSTANTIATE_TEST_SUITE_P(Models, ChatTemplateGoldenTest,
                         ::testing::Values("deepseek_v3", "llama3_1", "qwen2_5", "qwen3"));

TEST(ChatTemplateFeatureGoldenTest, EveryFeatureMatchesHuggingFaceJinja) {
  const ordered_json golden = load_golden("features");
  ASSERT_GE(golden["cases"].size(), 50u);
  for (const ordered_json& c : golden["cases"]) {
    const std::string name = c["name"].get<std::string>();
    auto tmpl = ChatTemplate::parse(c["template"].get<std::string>());
    Result<std::string> rendered =
        tmpl.ok() ? tmpl->render(golden["context"]) : Result<std::string>(tmpl.status());
    if (c.contains("error")) {
      EXPECT_FALSE(rendered.ok()) << name << ": the reference renderer fails but kite rendered "
                                  << ordered_json(rendered.value()).dump();
      continue;
    }
    ASSERT_TRUE(rendered.ok()) << name << ": " << rendered.status().message();
    const std::string want = c["expected"].get<std::string>();
    EXPECT_EQ(rendered.value(), want) << name << ": " << first_difference(want, rendered.value());
  }
}

}  // namespace
}  // namespace kite
