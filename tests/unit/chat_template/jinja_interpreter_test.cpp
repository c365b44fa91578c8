// Unit tests of the Jinja interpreter: expressions, statements, filters, whitespace control,
// errors and limits. Byte-exactness against @huggingface/jinja is covered by the golden
// tests; these pin behaviour the goldens cannot (errors, limits, Python-semantics choices).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/chat_template.h"

namespace kite {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

Result<std::string> render(const std::string& source,
                           const ordered_json& context = ordered_json::object(),
                           const jinja::RenderLimits* limits = nullptr) {
  auto t = ChatTemplate::parse(source);
  if (!t.ok()) return t.status();
  if (limits != nullptr) t->set_limits(*limits);
  return t->render(context);
}

std::string ok(const std::string& source, const ordered_json& context = ordered_json::object()) {
  auto r = render(source, context);
  EXPECT_TRUE(r.ok()) << source << " -> " << r.status().message();
  return r.ok() ? r.value() : "<error>";
}

std::string err(const std::string& source, const ordered_json& context = ordered_json::object()) {
  auto r = render(source, context);
  EXPECT_FALSE(r.ok()) << source << " rendered " << (r.ok() ? r.value() : "");
  return r.ok() ? "" : r.status().message();
}

TEST(JinjaExpressionTest, ArithmeticAndPrecedence) {
  EXPECT_EQ(ok("{{ 1 + 2 * 3 - 4 }}"), "3");
  EXPECT_EQ(ok("{{ (1 + 2) * 3 }}|{{ 2 ** 3 ** 2 }}"), "9|64");  // ** is left-associative
  EXPECT_EQ(ok("{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 4 }}|{{ 7 / 2 }}|{{ 4 / 2 }}"), "3|-4|3|3.5|2.0");
  EXPECT_EQ(ok("{{ x - 1 }}|{{ -x }}|{{ - x + 10 }}", {{"x", 5}}), "4|-5|5");
  EXPECT_EQ(ok("{{ 9223372036854775807 + 1 }}"), "9.223372036854776e+18");  // overflow -> float
  EXPECT_THAT(err("{{ 1 / 0 }}"), HasSubstr("division by zero"));
}

TEST(JinjaExpressionTest, LogicComparisonMembership) {
  EXPECT_EQ(ok("{{ a and b }}|{{ a or b }}|{{ not a }}|{{ '' or 'z' }}", {{"a", 0}, {"b", "y"}}),
            "0|y|true|z");
  EXPECT_EQ(ok("{{ 1 < 2 }}|{{ 'ab' < 'b' }}|{{ 1 == 1.0 }}|{{ none == undef }}|{{ [1, {'a': 2}] "
               "== [1, {'a': 2}] }}"),
            "true|true|true|true|true");  // containers compare by value, as in Python
  EXPECT_EQ(
      ok("{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in d }}{{ 'q' not in d }}{{ 1 in missing }}",
         {{"d", {{"k", 1}}}}),
      "truetruetruetruefalse");
  EXPECT_EQ(ok("{{ 'y' if c else 'n' }}{{ 'shown' if c }}{{ 'hidden' if not c }}", {{"c", true}}),
            "yshown");
}

TEST(JinjaExpressionTest, MembersIndexingAndSlices) {
  const ordered_json ctx = {{"m", {{"role", "user"}, {"parts", {1, 2, 3, 4}}}}, {"s", "héllo😀"}};
  EXPECT_EQ(ok("{{ m.role }}{{ m['role'] }}{{ m.parts[0] }}{{ m.parts[-1] }}{{ m.nope }}{{ "
               "m.parts[10] }}",
               ctx),
            "useruser14");
  EXPECT_EQ(ok("{{ m.parts[1:3] }}{{ m.parts[::-1] }}{{ m.parts[:-2] }}{{ m.parts[::2] }}", ctx),
            "[2, 3][4, 3, 2, 1][1, 2][1, 3]");
  EXPECT_EQ(ok("{{ s[::-1] }}|{{ s[1] }}|{{ s[-1] }}|{{ s|length }}", ctx),
            "😀olléh|é|😀|7");  // length in UTF-16
  EXPECT_EQ(ok("{{ undefined_thing.attr.more }}|{{ none_value.x }}", {{"none_value", nullptr}}),
            "|");
}

TEST(JinjaExpressionTest, StringMethods) {
  EXPECT_EQ(
      ok("{{ s.startswith('ab') }}{{ s.endswith(('x', 'ef')) }}{{ s.upper() }}", {{"s", "abcdef"}}),
      "truetrueABCDEF");
  EXPECT_EQ(
      ok("{{ ' a b '.split() }}{{ 'a--b--c'.split('--', 1) }}{{ 'aXbXc'.replace('X', '-', 1) }}"),
      "[\"a\", \"b\"][\"a\", \"b--c\"]a-bXc");
  // Python semantics: strip(chars) removes only those characters (the JS library strips all
  // whitespace and ignores the argument; Qwen3's template relies on the Python behaviour).
  EXPECT_EQ(ok("[{{ '\\n\\n  a \\n'.rstrip('\\n') }}]"), "[\n\n  a ]");
  EXPECT_EQ(ok("[{{ '\\n \\nx\\n'.lstrip('\\n') }}]"), "[ \nx\n]");
  EXPECT_EQ(ok("[{{ 'xyhixy'.strip('yx') }}][{{ '\\t pad \\u3000'.strip() }}]"), "[hi][pad]");
}

TEST(JinjaFilterTest, CommonFilters) {
  const ordered_json ctx = {{"xs", {3, 1, 2}}, {"d", {{"b", 1}, {"a", 2}}}, {"s", "  Hi There  "}};
  EXPECT_EQ(
      ok("{{ s|trim }}|{{ s|trim|lower }}|{{ s|upper|trim }}|{{ xs|length }}|{{ d|length }}", ctx),
      "Hi There|hi there|HI THERE|3|2");
  EXPECT_EQ(
      ok("{{ xs|sort }}{{ xs|first }}{{ xs|last }}{{ xs|join('-') }}{{ xs|reverse|list }}", ctx),
      "[1, 2, 3]323-1-2[2, 1, 3]");
  EXPECT_EQ(
      ok("{{ d|items }}{{ d|dictsort }}{{ missing|default('dv') }}{{ ''|default('e', true) }}",
         ctx),
      "[[\"b\", 1], [\"a\", 2]][[\"a\", 2], [\"b\", 1]]dve");
  EXPECT_EQ(ok("{{ d|tojson }}|{{ d|tojson(indent=2) }}", ctx),
            "{\"b\": 1, \"a\": 2}|{\n  \"b\": 1,\n  \"a\": 2\n}");
  EXPECT_EQ(ok("{{ 'é\"\\n'|tojson }}|{{ 'é'|tojson(ensure_ascii=true) }}"),
            "\"é\\\"\\n\"|\"\\u00e9\"");
  EXPECT_EQ(ok("{{ 'a b'|replace(' ', '_') }}{{ 3.9|int }}{{ '12'|int + 1 }}{{ -2|abs }}"),
            "a_b3132");
  // select/reject as Meta's Llama-3.1 template uses them (Python Jinja2 semantics).
  EXPECT_EQ(
      ok("{{ ['a', 'code_interpreter', 'b']|reject('equalto', 'code_interpreter')|join(', ') }}"),
      "a, b");
  EXPECT_EQ(ok("{{ [0, 1, 2, 3]|select('odd')|list }}{{ [0, '', 'x']|select|list }}"),
            "[1, 3][\"x\"]");
  EXPECT_THAT(err("{{ 'x'|frobnicate }}"), HasSubstr("unknown filter 'frobnicate'"));
  EXPECT_THAT(err("{{ 5|upper }}"), HasSubstr("filter 'upper' cannot be applied to a int"));
}

TEST(JinjaFilterTest, FloatsPrintLikePython) {
  const ordered_json ctx = {{"f", 1.0}, {"g", 1e-7}, {"h", 0.25}, {"big", 1e16}};
  EXPECT_EQ(ok("{{ f }} {{ g }} {{ h }} {{ big }}", ctx), "1.0 1e-07 0.25 1e+16");
  EXPECT_EQ(ok("{{ [f, g, h]|tojson }}", ctx), "[1.0, 1e-07, 0.25]");
}

TEST(JinjaTestTest, Tests) {
  const ordered_json ctx = {{"n", nullptr}, {"i", 3},   {"f", 1.5},
                            {"s", "x"},     {"l", {1}}, {"m", {{"a", 1}}}};
  EXPECT_EQ(
      ok("{{ n is none }}{{ n is not none }}{{ q is defined }}{{ q is undefined }}{{ i is odd }}",
         ctx),
      "truefalsefalsetruetrue");
  EXPECT_EQ(ok("{{ i is number }}{{ f is integer }}{{ s is string }}{{ m is mapping }}{{ l is "
               "iterable }}",
               ctx),
            "truefalsetruetruetrue");
  EXPECT_EQ(ok("{{ i is divisibleby(3) }}{{ s is equalto('x') }}", ctx), "truetrue");
  EXPECT_THAT(err("{{ 1 is frobnicated }}"), HasSubstr("unknown test 'frobnicated'"));
}

TEST(JinjaStatementTest, LoopsScopesNamespacesMacros) {
  const ordered_json ctx = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(
      ok("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
         ctx),
      "1a,2b,3c");
  EXPECT_EQ(ok("{% for x in xs if x != 'b' %}{{ loop.index0 }}{{ x }}{% endfor %}", ctx), "0a1c");
  EXPECT_EQ(ok("{% for x in [] %}x{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(ok("{% set v = 1 %}{% for x in xs %}{% set v = 2 %}{% endfor %}{{ v }}", ctx), "1");
  EXPECT_EQ(ok("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + 1 %}{% endfor "
               "%}{{ ns.n }}",
               ctx),
            "3");
  EXPECT_EQ(ok("{% macro m(a, b='B') %}{{ a }}{{ b }}{{ kwargs|length }}{% endmacro %}{{ m(1) "
               "}}|{{ m(1, b=2) }}"),
            "1B0|120");
  // Python semantics for break: output before the break is kept.
  EXPECT_EQ(ok("{% for i in range(5) %}{{ i }}{% if i == 2 %}{% break %}{% endif %}{% endfor %}"),
            "012");
  EXPECT_EQ(ok("{% for c in 'ab' %}{{ c }}.{% endfor %}"), "a.b.");  // strings iterate (Python)
  EXPECT_THAT(err("{% set x.y = 1 %}", {{"x", {{"y", 0}}}}), HasSubstr("only of a namespace()"));
  // A namespace may hold another but never itself, directly or inside a list (a reference
  // cycle that would never be freed: the chat-template fuzzer's leak).
  EXPECT_EQ(ok("{% set a = namespace(n=1) %}{% set b = namespace(x=0) %}{% set b.x = a %}"
               "{{ b.x.n }}"),
            "1");
  EXPECT_THAT(err("{% set ns = namespace(n=0) %}{% set ns.n = ns %}"),
              HasSubstr("cannot hold itself"));
  EXPECT_THAT(err("{% set ns = namespace(n=0) %}{% set ns.n = [1, ns] %}"),
              HasSubstr("cannot hold itself"));
  EXPECT_THAT(err("{% set a = namespace(n=0) %}{% set b = namespace(x=0) %}{% set b.x = a %}"
                  "{% set a.n = b %}"),
              HasSubstr("cannot hold itself"));
}

TEST(JinjaWhitespaceTest, TrimAndLstripBlocksAndDashes) {
  EXPECT_EQ(ok("{% if true %}\nyes\n{% endif %}\n"), "yes\n");        // trim_blocks + final newline
  EXPECT_EQ(ok("  {% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");  // lstrip_blocks
  EXPECT_EQ(ok("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(ok("a {#- comment -#} b"), "ab");
  EXPECT_EQ(ok("    {{ 'kept indent' }}"), "    kept indent");             // {{ is not lstripped
  EXPECT_EQ(ok("x {%- generation %} y {% endgeneration -%} z"), "x y z");  // as @huggingface/jinja
}

TEST(JinjaErrorTest, SyntaxErrorsNameLineAndColumn) {
  EXPECT_THAT(err("line one\n  {{ a ? b }}"), HasSubstr("line 2, column 8"));
  // Preprocessing removes bytes before the error; positions still refer to the source.
  EXPECT_THAT(err("{% if x %}\n    {% if y %}\n{{ é ! }}{% endif %}{% endif %}"),
              HasSubstr("line 3, column 4"));
  const std::string unclosed = err("ok\n{% for x in y %}\n{{ x }}");
  EXPECT_THAT(unclosed, HasSubstr("line 2, column 1"));
  EXPECT_THAT(unclosed, HasSubstr("endfor"));
  EXPECT_THAT(err("{% endif %}"), HasSubstr("unexpected statement 'endif'"));
  EXPECT_THAT(err("{{ 'unterminated }}"), HasSubstr("unterminated string"));
  EXPECT_THAT(err("{{ x "), HasSubstr("syntax error"));
  EXPECT_THAT(err("{{ f(a=1, 2) }}"), HasSubstr("positional argument follows keyword argument"));
}

TEST(JinjaErrorTest, RuntimeErrorsCarryMessageAndPosition) {
  const std::string raised =
      err("\n  {{ raise_exception('Roles must alternate user/assistant') }}");
  EXPECT_THAT(raised, HasSubstr("Roles must alternate user/assistant"));
  EXPECT_THAT(raised, HasSubstr("line 2"));
  // Raised inside a macro: the innermost position is reported, once.
  const std::string nested =
      err("{% macro f() %}{{ raise_exception('deep') }}{% endmacro %}{{ f() }}");
  EXPECT_THAT(nested, HasSubstr("column 19: raise_exception(): deep"));
  EXPECT_THAT(err("{{ 'a' + none }}"), HasSubstr("none"));
  EXPECT_THAT(err("{{ nothing() }}"), HasSubstr("'nothing' is not callable"));
  EXPECT_THAT(err("{% for x in 5 %}{% endfor %}"), HasSubstr("cannot loop over a int"));
}

TEST(JinjaLimitTest, HostileTemplatesFailInsteadOfHangingOrCrashing) {
  EXPECT_THAT(err("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
              HasSubstr("nests deeper"));
  std::string nested_ifs;
  for (int i = 0; i < 500; ++i) nested_ifs += "{% if true %}";
  EXPECT_THAT(err(nested_ifs), HasSubstr("nests deeper"));
  EXPECT_THAT(err("{{ " + std::string(5000, '-') + "1 }}"), HasSubstr("nests deeper"));
  EXPECT_THAT(err("{{ " + std::string(3000, '[') + " }}"), HasSubstr("nests deeper"));
  // Long left-deep chains build deep trees without parser recursion; they are bounded too.
  std::string sum = "{{ 0";
  for (int i = 0; i < 200; ++i) sum += " + 1";
  EXPECT_EQ(ok(sum + " }}"), "200");
  std::string long_sum = "{{ 0";
  for (int i = 0; i < 100000; ++i) long_sum += " ~ x";
  EXPECT_THAT(err(long_sum + " }}"), HasSubstr("nests deeper"));
  std::string pipes = "{{ x";
  for (int i = 0; i < 100000; ++i) pipes += "|trim";
  EXPECT_THAT(err(pipes + " }}"), HasSubstr("nests deeper"));
  EXPECT_THAT(err("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
              HasSubstr("calls nest deeper"));
  jinja::RenderLimits small;
  small.max_loop_iterations = 10'000;
  small.max_output_bytes = 1 << 16;
  auto loops =
      render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
             ordered_json::object(), &small);
  ASSERT_FALSE(loops.ok());
  EXPECT_THAT(loops.status().message(), HasSubstr("loop iterations"));
  auto doubling = render(
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% "
      "endfor %}",
      ordered_json::object(), &small);
  ASSERT_FALSE(doubling.ok());
  EXPECT_EQ(doubling.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(err("{{ range(100000000) }}"), HasSubstr("range()"));
}

}  // namespace
}  // namespace kite
