// ChatTemplate API: tokenizer_config parsing, context handling, randomized conversations
// checked against hand-written renderings of the real templates, and template fuzzing.
#include "tokenizer/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/jinja_text.h"

namespace kite {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

json model_config(const std::string& model) {
  std::ifstream in(std::string(KITE_SOURCE_DIR) + "/tools/fixtures/chat_template/goldens/" + model +
                   ".json");
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str())["tokenizer_config"];
}

TEST(ChatTemplateConfigTest, ReadsStringTemplateAndAddedTokenObjects) {
  auto t = ChatTemplate::from_tokenizer_config(model_config("deepseek_v3"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->bos_token(), "<｜begin▁of▁sentence｜>");  // stored as {"content": ...}
  EXPECT_EQ(t->eos_token(), "<｜end▁of▁sentence｜>");
  auto qwen = ChatTemplate::from_tokenizer_config(model_config("qwen3"));
  ASSERT_TRUE(qwen.ok());
  EXPECT_FALSE(qwen->bos_token().has_value());  // null in the config
  EXPECT_EQ(qwen->eos_token(), "<|im_end|>");
}

TEST(ChatTemplateConfigTest, PicksNamedTemplateFromList) {
  const json config = {
      {"chat_template", json::array({{{"name", "tool_use"}, {"template", "T{{ bos_token }}"}},
                                     {{"name", "default"}, {"template", "D{{ bos_token }}"}}})},
      {"bos_token", "<s>"}};
  auto d = ChatTemplate::from_tokenizer_config(config);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->render(json::object()).value(), "D<s>");
  auto tool = ChatTemplate::from_tokenizer_config(config, "tool_use");
  ASSERT_TRUE(tool.ok());
  EXPECT_EQ(tool->render(json{{"bos_token", "<B>"}}).value(), "T<B>");  // context overrides
  auto missing = ChatTemplate::from_tokenizer_config(config, "rag");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("tool_use, default"));
}

TEST(ChatTemplateConfigTest, ReportsBadConfigs) {
  auto none = ChatTemplate::from_tokenizer_config(json{{"bos_token", "<s>"}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  auto bad_token =
      ChatTemplate::from_tokenizer_config(json{{"chat_template", "x"}, {"eos_token", 5}});
  ASSERT_FALSE(bad_token.ok());
  EXPECT_THAT(bad_token.status().message(), HasSubstr("eos_token"));
  auto syntax = ChatTemplate::from_tokenizer_config(json{{"chat_template", "{% if %}"}});
  ASSERT_FALSE(syntax.ok());
  EXPECT_THAT(syntax.status().message(), HasSubstr("line 1"));
  auto t = ChatTemplate::parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->render(json::array()).ok());  // the context must be an object
  ordered_json deep = "leaf";
  for (int i = 0; i < 2000; ++i) deep = ordered_json::array({deep});
  auto too_deep = t->render(ordered_json{{"messages", deep}});
  ASSERT_FALSE(too_deep.ok());
  EXPECT_THAT(too_deep.status().message(), HasSubstr("nests deeper"));
}

TEST(ChatTemplateContextTest, OrderedJsonKeepsToolSchemaKeyOrder) {
  auto t = ChatTemplate::parse("{{ tools[0] | tojson }}");
  ASSERT_TRUE(t.ok());
  const std::string schema =
      R"({"tools": [{"type": "function", "name": "f", "args": {"z": 1, "a": 2}}]})";
  EXPECT_EQ(t->render(ordered_json::parse(schema)).value(),
            R"({"type": "function", "name": "f", "args": {"z": 1, "a": 2}})");
  EXPECT_EQ(t->render(json::parse(schema)).value(),
            R"({"args": {"a": 2, "z": 1}, "name": "f", "type": "function"})");
}

TEST(ChatTemplateContextTest, ConcurrentRendersAgree) {
  auto t = ChatTemplate::from_tokenizer_config(model_config("qwen3"));
  ASSERT_TRUE(t.ok());
  const ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                            {"add_generation_prompt", true}};
  const std::string want = t->render(ctx).value();
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) got[i] = t->render(ctx).value();
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, want);
}

// Random text with the characters templates treat specially: braces, quotes, backslashes,
// ASCII and Unicode whitespace, multi-byte and astral code points.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {
      "a",      "Z",      "7",       " ",        "\n",         "\t",   "{", "}",    "{{",
      "%}",     "#",      "'",       "\"",       "\\",         "-",    "é", "日本", "😀",
      "\u3000", "\u00a0", "<think>", "</think>", "<|im_end|>", "\r\n", ".", "x y"};
  std::uniform_int_distribution<size_t> len(0, 12);
  std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
  std::string s;
  for (size_t n = len(rng), i = 0; i < n; ++i) s += kPieces[pick(rng)];
  return s;
}

ordered_json random_conversation(std::mt19937& rng, bool with_system) {
  ordered_json messages = ordered_json::array();
  if (with_system) messages.push_back({{"role", "system"}, {"content", random_text(rng)}});
  const int turns = std::uniform_int_distribution<int>(1, 6)(rng);
  for (int i = 0; i < turns; ++i) {
    messages.push_back(
        {{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", random_text(rng)}});
  }
  return messages;
}

// Renders `model`'s real template on random conversations and compares with `expected`,
// a hand-written rendering of the same format.
template <typename Expected>
void check_random_conversations(const std::string& model, uint32_t seed, Expected expected) {
  auto t = ChatTemplate::from_tokenizer_config(model_config(model));
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::mt19937 rng(seed);
  for (int i = 0; i < 150; ++i) {
    const bool gen = rng() % 2 == 0;
    const ordered_json messages = random_conversation(rng, rng() % 2 == 0);
    auto got = t->render(ordered_json{{"messages", messages}, {"add_generation_prompt", gen}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got.value(), expected(messages, gen, *t))
        << "seed " << seed << " case " << i << ": " << messages.dump();
  }
}

TEST(ChatTemplatePropertyTest, Qwen25RandomConversations) {
  check_random_conversations(
      "qwen2_5", 1234, [](const ordered_json& msgs, bool gen, const ChatTemplate&) {
        std::string out = "<|im_start|>system\n";
        const bool sys = msgs[0]["role"] == "system";
        out += sys ? msgs[0]["content"].get<std::string>()
                   : "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
        out += "<|im_end|>\n";
        for (size_t i = sys ? 1 : 0; i < msgs.size(); ++i) {
          out += "<|im_start|>" + msgs[i]["role"].get<std::string>() + "\n" +
                 msgs[i]["content"].get<std::string>() + "<|im_end|>\n";
        }
        return gen ? out + "<|im_start|>assistant\n" : out;
      });
}

TEST(ChatTemplatePropertyTest, Llama31RandomConversations) {
  check_random_conversations(
      "llama3_1", 99, [](const ordered_json& msgs, bool gen, const ChatTemplate& t) {
        std::string out;
        for (size_t i = 0; i < msgs.size(); ++i) {
          if (i == 0) out += *t.bos_token();
          // The template trims content with JS String.prototype.trim semantics (incl. U+3000).
          out += "<|start_header_id|>" + msgs[i]["role"].get<std::string>() +
                 "<|end_header_id|>\n\n" +
                 std::string(jinja::trim_js(msgs[i]["content"].get<std::string>())) + "<|eot_id|>";
        }
        return gen ? out + "<|start_header_id|>assistant<|end_header_id|>\n\n" : out;
      });
}

TEST(ChatTemplatePropertyTest, DeepSeekV3RandomConversations) {
  check_random_conversations(
      "deepseek_v3", 7, [](const ordered_json& msgs, bool gen, const ChatTemplate& t) {
        std::string out = *t.bos_token();
        for (const auto& m : msgs) {
          if (m["role"] == "system") out += m["content"].get<std::string>();
        }
        for (const auto& m : msgs) {
          if (m["role"] == "user") out += "<｜User｜>" + m["content"].get<std::string>();
          if (m["role"] == "assistant")
            out += "<｜Assistant｜>" + m["content"].get<std::string>() + "<｜end▁of▁sentence｜>";
        }
        return gen ? out + "<｜Assistant｜>" : out;
      });
}

// Random soups of template fragments must parse-and-render or fail with an error, never
// crash or hang; both outcomes must occur or the generator is not exercising anything.
TEST(ChatTemplateFuzzTest, RandomTemplatesNeverCrash) {
  static const std::vector<std::string> kFragments = {
      "{{",     "}}",         "{%",       "%}",      "{#",
      "#}",     "{%-",        "-%}",      "{{-",     "-}}",
      " if ",   " for ",      " in ",     " endif ", " endfor ",
      " else ", " set ",      " x ",      " ns ",    "namespace(a=1)",
      " = ",    "(",          ")",        "[",       "]",
      "{",      "}",          ",",        ":",       ".",
      "|",      "length",     "tojson",   "trim",    "'s'",
      "\"q\"",  "1",          "-",        "+",       "*",
      "~",      " and ",      " not ",    " is ",    "defined",
      " none ", "loop.index", "messages", "[::-1]",  "\n",
      "  ",     "text",       "é"};
  std::mt19937 rng(42);
  std::uniform_int_distribution<size_t> len(1, 24);
  std::uniform_int_distribution<size_t> pick(0, kFragments.size() - 1);
  const ordered_json ctx = {
      {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"x", {1, 2, 3}}, {"s", "abc"}};
  jinja::RenderLimits limits;
  limits.max_loop_iterations = 10'000;
  limits.max_output_bytes = 1 << 16;
  int rendered = 0;
  int failed = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string source;
    for (size_t n = len(rng), k = 0; k < n; ++k) source += kFragments[pick(rng)];
    auto t = ChatTemplate::parse(source);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty());
      ++failed;
      continue;
    }
    t->set_limits(limits);
    auto r = t->render(ctx);
    r.ok() ? ++rendered : ++failed;
  }
  EXPECT_GT(rendered, 100);
  EXPECT_GT(failed, 100);
}

}  // namespace
}  // namespace kite
