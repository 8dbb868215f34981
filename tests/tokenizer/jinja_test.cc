// The Jinja engine (tlaloc/tokenizer/jinja.h): unit cases with the text written out here, and
// an oracle, tests/tokenizer/jinja_render.py, which renders every case with jinja2 the way
// transformers' apply_chat_template does; the two must agree byte for byte (or both fail).
// Templates: Qwen3's own (data/qwen3/tokenizer_config.json), the one Tlaloc writes into the
// checkpoints it creates (src/models/init_tokenizer_config.cc), and templates of our own under
// tests/tokenizer/jinja_templates/ that use what published Llama, Gemma, Mistral and DeepSeek
// templates use; each over conversations with system/user/assistant/tool roles, reasoning,
// tools and tool calls, enable_thinking true/false/absent and add_generation_prompt on/off.
#include "tlaloc/tokenizer/jinja.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/oracle.h"

namespace tlaloc::jinja {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

StatusOr<std::string> Render(const std::string& tmpl, const Json& ctx,
                             const JinjaLimits& limits = {}) {
  TL_ASSIGN_OR_RETURN(Template t, Template::Parse(tmpl));
  return t.Render(ctx, limits);
}

struct UnitCase {
  const char* tmpl;
  const char* context;
  const char* want;
};

// Each case's text is also checked against jinja2 by OracleAgreesWithUnitCases.
const UnitCase kUnitCases[] = {
    {"{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }}", "{}",
     "7 3 -4 1 2 1024"},
    {"{{ 7 / 2 }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 4 / 2 }}", "{}",
     "3.5 1.0 0.30000000000000004 1e+20 1.5e-07 2.0"},
    {"{{ 'a' ~ 1 ~ none ~ true ~ undefined_name }}|{{ none }}|{{ [1, 'x', none] }}|{{ {'k': 1} }}",
     "{}", "a1NoneTrue|None|[1, 'x', None]|{'k': 1}"},
    {"{{ x[::-1] }} {{ x[1:] }} {{ x[:-1] }} {{ x[::2] }} {{ s[1:3] }} {{ s[-1] }} {{ x[5] is "
     "undefined }}",
     R"({"x": [1, 2, 3, 4], "s": "héllo"})", "[4, 3, 2, 1] [2, 3, 4] [1, 2, 3] [1, 3] él o True"},
    {"{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in d }} {{ 1 < 2 < 3 }} {{ 1 == 1.0 }} "
     "{{ true == 1 }} {{ not 0 and 'y' or 'n' }}",
     R"({"d": {"k": 0}})", "True False True True True True y"},
    {"{% if a is defined %}A{% elif b is none %}B{% else %}C{% endif %}"
     "{{ c is string }}{{ d is mapping }}{{ e is iterable }}{{ e is sequence }}{{ 1 is number }}"
     "{{ t is true }}{{ t is false }}{{ z is undefined }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}",
     R"({"b": null, "c": "s", "d": {}, "e": [], "t": true})",
     "BTrueTrueTrueTrueTrueTrueFalseTrueTrueTrue"},
    {"{{ 'yes' if x else 'no' }}{{ 'only' if x }}.", R"({"x": 0})", "no."},
    {"{% for k, v in d | items %}{{ loop.index }}{{ k }}={{ v }}{{ ',' if not loop.last }}"
     "{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for x in [] %}{% else %}empty{% endfor "
     "%}",
     R"({"d": {"z": 1, "a": 2}})", "1z=1,2a=2|za|empty"},
    {"{% for x in xs %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.length }}{{ loop.first }}"
     "{% if x == 2 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}.{% endfor %}",
     R"({"xs": [1, 2, 3, 4]})", "044True.134False224False"},
    {"{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
     "{% set local = i %}{% endfor %}{{ ns.n }}{{ local is defined }}",
     "{}", "6False"},
    {"{% set a, b = [1, 2] %}{{ b }}{{ a }}{% set t %}x{{ a }}y{% endset %}[{{ t }}]"
     "{% set u | upper %}low{% endset %}{{ u }}",
     "{}", "21[x1y]LOW"},
    {"{% macro m(a, b='B', c=none) %}<{{ a }}{{ b }}{{ c }}>{% endmacro %}{{ m(1) }}"
     "{{ m(2, c=3) }}{{ m('x', 'y') }}",
     "{}", "<1BNone><2B3><xyNone>"},
    {"{{ d | tojson }} {{ d | tojson(indent=2) }} {{ 'é\"\\\\\n' | tojson }} {{ [] | tojson }}",
     R"({"d": {"b": [1, 2.5, null, true], "a": "ü"}})",
     "{\"b\": [1, 2.5, null, true], \"a\": \"ü\"} {\n  \"b\": [\n    1,\n    2.5,\n    null,\n"
     "    true\n  ],\n  \"a\": \"ü\"\n} \"é\\\"\\\\\\n\" []"},
    {"{{ '  x  ' | trim }}|{{ xs | length }}{{ 'añb' | count }}|{{ 'ab' | upper }}{{ 'AB' | lower "
     "}}|{{ xs | first }}{{ xs | last }}|{{ xs | join('-') }}|{{ u | default('d') }}{{ '' | d('e', "
     "true) }}|{{ 'aXbX' | replace('X', '.') }}|{{ 'abc' | list }}|{{ '12' | int + 1 }}|{{ 'hi "
     "there' | capitalize }}{{ 'hi there' | title }}|{{ 5 | string ~ 'x' | safe }}",
     R"({"xs": [3, 1, 2]})", "x|33|ABab|32|3-1-2|de|a.b.|['a', 'b', 'c']|13|Hi thereHi There|5x"},
    {"{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | join }}"
     "{{ ms | rejectattr('role', 'equalto', 'user') | list | length }}"
     "{{ ms | selectattr('x', 'defined') | list | length }}{{ ms | map(attribute='role') | unique "
     "| list }}",
     R"({"ms": [{"role": "user", "c": "a"}, {"role": "bot", "c": "b", "x": 1},
                {"role": "user", "c": "c"}]})",
     "ac11['user', 'bot']"},
    {"{{ s.startswith('ab') }}{{ s.endswith(('x', 'cd')) }}{{ s.split('b') }}{{ ' a  b '.split() "
     "}}{{ '\\n\\nx\\n'.strip('\\n') }}{{ ' x '.rstrip() }}|{{ ' x '.lstrip() }}{{ s.upper() }}"
     "{{ s.replace('b', 'B') }}{{ 'ab cd'.title() }}{{ '{} and {x}'.format(1, x=2) }}",
     R"({"s": "abcd"})", "TrueTrue['a', 'cd']['a', 'b']x x|x ABCDaBcdAb Cd1 and 2"},
    {"{{ d.get('a') }}{{ d.get('z', 'no') }}{{ d.get('z') }}{{ d.items() | list }}{{ d.keys() | "
     "list }}{{ d.values() | list }}{{ d.a }}{{ d['a'] }}",
     R"({"d": {"a": 1, "b": 2}})", "1noNone[('a', 1), ('b', 2)]['a', 'b'][1, 2]11"},
    // Whitespace: trim_blocks, lstrip_blocks, `-` and `+` markers, comments.
    {"<\n  {% if true %}\n    a\n  {% endif %}\n  {# c #}\n  b {{- ' c ' -}} d\n{%+ if true %}x{% "
     "endif +%}\ny\n",
     "{}", "<\n    a\n  b c d\nx\ny"},
    {"{%- raw %}{{ not rendered }}{% endraw -%}  !", "{}", "{{ not rendered }}!"},
    {"{% filter upper %}up {{ 'x' }}{% endfilter %}", "{}", "UP X"},
    {"{% macro box(t) %}[{{ caller() }}{{ t }}]{% endmacro %}{% call box('!') %}in{% endcall %}",
     "{}", "[in!]"},
};

TEST(JinjaTest, UnitCases) {
  for (const UnitCase& c : kUnitCases) {
    auto got = Render(c.tmpl, Json::parse(c.context));
    ASSERT_TRUE(got.ok()) << c.tmpl << "\n" << got.status().ToString();
    EXPECT_EQ(*got, c.want) << c.tmpl;
  }
}

TEST(JinjaTest, UndefinedBehavesAsJinja2Default) {
  EXPECT_EQ(*Render("[{{ nope }}][{{ nope | length }}][{% for x in nope %}x{% endfor %}]"
                    "[{{ d.missing }}][{{ d.missing is defined }}]",
                    Json::parse(R"({"d": {}})")),
            "[][0][][][False]");
  auto attr_of_undefined = Render("{{ nope.attr }}", Json::object());
  ASSERT_FALSE(attr_of_undefined.ok());
  EXPECT_NE(attr_of_undefined.status().message().find("'nope' is undefined"), std::string::npos)
      << attr_of_undefined.status().message();
}

void ExpectError(const std::string& tmpl, const std::string& want) {
  auto r = Render(tmpl, Json::object());
  ASSERT_FALSE(r.ok()) << tmpl << " rendered " << *r;
  EXPECT_NE(r.status().message().find(want), std::string::npos)
      << tmpl << "\n  error: " << r.status().message() << "\n  expected to contain: " << want;
}

TEST(JinjaTest, ErrorsNameTheLineAndWhatWasFound) {
  ExpectError("a\nb\n{% if x %}\nc\n", "unclosed 'if' block opened at line 3");
  ExpectError("{% for x in y %}\n{% endif %}", "template line 2, column 4: unexpected 'endif'");
  ExpectError("x\n{{ y | no_such_filter }}",
              "template line 2, column 8: unknown filter 'no_such_filter'");
  ExpectError("x\n\n  {{ raise_exception('bad roles') }}", "template line 3");
  ExpectError("{{ raise_exception('bad roles') }}", "raise_exception: bad roles");
  ExpectError("{% include 'x' %}", "unknown or unsupported tag 'include'");
  ExpectError("{{ 1 +  }}", "template line 1, column 9: expected an expression, found '}}'");
  ExpectError("{{ 'abc }}", "unterminated string literal");
  ExpectError("{{ x ", "unclosed tag");
  ExpectError("{# x", "unclosed comment");
  ExpectError("\n{{ 1 + 'a' }}", "template line 2");
  ExpectError("{{ [1][0:1:0] }}", "slice step cannot be zero");
  ExpectError("{% break %}", "'break' outside of a for loop");
  ExpectError("{% set x = 1 %}{% set x.y = 2 %}", "not a namespace()");
}

TEST(JinjaTest, LimitsStopRunawayTemplates) {
  JinjaLimits small;
  small.max_loop_iterations = 1000;
  small.max_output_bytes = 1 << 16;
  small.max_call_depth = 20;
  auto loops = Render("{% for i in range(10) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                      Json::object(), small);
  ASSERT_FALSE(loops.ok());
  EXPECT_NE(loops.status().message().find("max_loop_iterations"), std::string::npos);
  auto recursion =
      Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", Json::object(), small);
  ASSERT_FALSE(recursion.ok());
  EXPECT_NE(recursion.status().message().find("max_call_depth"), std::string::npos);
  auto big = Render("{{ 'abc' * 100000 }}", Json::object(), small);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("max_output_bytes"), std::string::npos);
  auto doubling = Render(
      "{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}"
      "{% endfor %}{{ ns.x }}",
      Json::object(), small);
  ASSERT_FALSE(doubling.ok());
  EXPECT_NE(doubling.status().message().find("max_output_bytes"), std::string::npos);
}

// A macro in its frame and a namespace holding itself are reference cycles; the engine frees them
// after rendering (the ASan build's leak check fails this test otherwise; jinja_template_fuzz
// found it).
TEST(JinjaTest, ReferenceCyclesAreFreed) {
  auto r = Render(
      "{% set ns = namespace(n=1) %}{% set ns.me = ns %}{% set d = {'ns': ns} %}"
      "{% set ns.get = d.get %}{% macro m(x) %}{{ x }}{{ ns.me.n }}{% endmacro %}{% set ns.m = m %}"
      "{% for i in [1, 2] %}{% macro inner() %}{{ i }}{% endmacro %}{{ ns.m(inner()) }}{% endfor "
      "%}",
      Json::object());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "1121");
}

// ---- The oracle.

struct OracleCase {
  std::string name;
  std::string tmpl;
  Json context;
};

// Runs jinja_render.py over the cases; each result is {"text": ...} or {"error": ...}.
::testing::AssertionResult RunOracle(const std::vector<OracleCase>& cases, Json* results) {
  const fs::path dir =
      fs::temp_directory_path() / ("tlaloc_jinja_oracle_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Json request = Json::array();
  for (const auto& c : cases) request.push_back({{"template", c.tmpl}, {"context", c.context}});
  std::ofstream(dir / "cases.json") << request.dump();
  const std::string cmd = testing::OraclePython() + " '" + TLALOC_SOURCE_DIR +
                          "/tests/tokenizer/jinja_render.py' '" + (dir / "cases.json").string() +
                          "' >'" + (dir / "out.json").string() + "' 2>'" +
                          (dir / "err.txt").string() + "'";
  const int rc = std::system(cmd.c_str());
  const std::string out = ReadFile(dir / "out.json"), err = ReadFile(dir / "err.txt");
  fs::remove_all(dir);
  if (rc != 0) return ::testing::AssertionFailure() << cmd << " failed:\n" << err;
  *results = Json::parse(out);
  if (results->size() != cases.size())
    return ::testing::AssertionFailure() << "the oracle returned " << results->size()
                                         << " results for " << cases.size() << " cases";
  return ::testing::AssertionSuccess();
}

// Compares Tlaloc with jinja2 on every case; returns how many agreed. `rendered` counts the
// cases jinja2 rendered (the others are errors on both sides).
size_t CompareWithOracle(const std::vector<OracleCase>& cases, size_t* rendered) {
  *rendered = 0;
  Json results;
  EXPECT_TRUE(RunOracle(cases, &results));
  if (results.size() != cases.size()) return 0;
  size_t agreed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const OracleCase& c = cases[i];
    auto got = Render(c.tmpl, c.context);
    const Json& want = results[i];
    if (want.contains("error")) {
      const std::string werr = want["error"].get<std::string>();
      EXPECT_FALSE(got.ok()) << c.name << ": jinja2 failed (" << werr << ") but Tlaloc rendered "
                             << Json(*got).dump();
      if (got.ok()) continue;
      // raise_exception's message must come through.
      const std::string prefix = "TemplateError: ";
      if (werr.rfind(prefix, 0) == 0) {
        EXPECT_NE(got.status().message().find(werr.substr(prefix.size())), std::string::npos)
            << c.name << ": " << got.status().message() << " vs jinja2's " << werr;
      }
      ++agreed;
      continue;
    }
    if (!got.ok()) {
      ADD_FAILURE() << c.name << ": " << got.status().ToString() << "\n  jinja2 rendered "
                    << want["text"].dump();
      continue;
    }
    const std::string text = want["text"].get<std::string>();
    ++*rendered;
    if (*got == text) {
      ++agreed;
    } else {
      ADD_FAILURE() << c.name << "\n  Tlaloc: " << Json(*got).dump()
                    << "\n  jinja2: " << Json(text).dump();
    }
  }
  return agreed;
}

#define TL_REQUIRE_JINJA2()                                                 \
  do {                                                                      \
    if (std::string why = testing::PythonMissing("jinja2"); !why.empty()) { \
      TL_ORACLE_MISSING(why);                                               \
    }                                                                       \
  } while (0)

TEST(JinjaTest, OracleAgreesWithUnitCases) {
  TL_REQUIRE_JINJA2();
  std::vector<OracleCase> cases;
  for (const UnitCase& c : kUnitCases) cases.push_back({c.tmpl, c.tmpl, Json::parse(c.context)});
  Json results;
  ASSERT_TRUE(RunOracle(cases, &results));
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(results[i].contains("text")) << cases[i].tmpl << ": " << results[i].dump();
    EXPECT_EQ(results[i]["text"].get<std::string>(), kUnitCases[i].want) << cases[i].tmpl;
  }
}

// More of the language, checked only against jinja2 (no text written out here).
TEST(JinjaTest, MoreFiltersTestsAndMethodsMatchJinja2) {
  TL_REQUIRE_JINJA2();
  const Json ctx = Json::parse(R"({"xs": [3, -1, 2.5, 10], "ws": ["b", "A", "c"],
      "people": [{"name": "Zoe", "age": 31}, {"name": "al", "age": 25}, {"name": "Bo"}],
      "d": {"b": 2, "A": 1, "c": null}, "s": "a,b,,c", "text": "line one\nline two\n",
      "n": 7, "f": -2.75, "u": "ÉCOLE é", "empty": [], "nested": {"k": {"v": [1, {"w": "deep"}]}}})");
  const char* templates[] = {
      "{{ d | dictsort }}|{{ ws | sort }}|{{ ws | sort(reverse=true) }}|{{ ws | "
      "sort(case_sensitive=true) }}",
      "{{ people | sort(attribute='name') | map(attribute='name') | join(',') }}",
      "{{ xs | min }} {{ xs | max }} {{ xs | sum }} {{ [1, 2] | sum(start=10) }} {{ f | abs }} {{ "
      "n | abs }}",
      "{{ f | round }} {{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ "
      "2.9 | round(method='floor') }}",
      "[{{ text | indent }}][{{ text | indent(2, true) }}][{{ 'a\n\nb' | indent(width=3, "
      "blank=true) }}]",
      "{{ 'one two  three' | wordcount }} {{ '<a href=\"x\">&</a>' | e }} {{ \"it's\" | escape }}",
      "{{ xs | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ ws | "
      "map('upper') | join }}",
      "{{ people | selectattr('age') | map(attribute='name') | list }} {{ people | "
      "rejectattr('age', 'defined') | list | length }}",
      "{{ people | map(attribute='age', default=0) | list }} {{ people | selectattr('age', 'gt', "
      "26) | list | length }}",
      "{{ s.split(',') }} {{ s.split(',', 1) }} {{ s.rsplit(',', 1) }} {{ text.splitlines() }} {{ "
      "s.find('b') }} {{ s.count(',') }}",
      "{{ '42'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'Ab'.islower() }} {{ "
      "'AB'.isupper() }} {{ '-'.join(ws) }}",
      "{{ u | lower }} {{ u | upper }} {{ u.title() }} {{ u | length }} {{ u[::-1] }} {{ u[1:4] }} "
      "{{ 'ß' | upper }}",
      "{{ '3.7' | int }} {{ 'x' | int(5) }} {{ '2' | float }} {{ 3 | float }} {{ true | int }} {{ "
      "'  8 ' | int }}",
      "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1, 2] + [3] }} {{ 2 * 'x' }} {{ 10 / 4 }} {{ 10 // 4 }} {{ "
      "-10 % 3 }} {{ 2 ** -1 }}",
      "{% for x in xs %}{{ loop.previtem | default('^') }}>{{ x }}>{{ loop.nextitem | default('$') "
      "}} {{ loop.cycle('a', 'b') }};{% endfor %}",
      "{{ none is none }} {{ 1 is sameas 1 }} {{ 'a' is in 'abc' }} {{ 'abc' is lower }} {{ 'ABC' "
      "is upper }} {{ 5 is integer }} {{ 5.0 is float }} {{ true is boolean }}",
      "{{ xs is sequence }} {{ d is iterable }} {{ n is number }} {{ n is divisibleby 7 }} {{ x is "
      "callable }} {{ range is callable }} {{ 3 is ge 3 }} {{ 2 is lt 1 }}",
      "{{ nested.k.v[1].w }} {{ nested['k']['v'][0] }} {{ nested.k.v.1.w }} {{ nested.k.missing | "
      "default('none') }} {{ (nested.k.v | last).w | upper }}",
      "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ range(0) "
      "| list }}",
      "{% set a = [1, 2, 3] %}{{ a[-1] }}{{ a[1:] }}{{ a[:1] }}{{ a[::-2] }}{{ a[5:] }}{{ a[-5:2] "
      "}}{{ 'abcdef'[1::2] }}",
      "{{ (1, 2) }} {{ (1,) }} {{ () }} {{ d.items() | list }} {{ d | items | list | first }} {{ "
      "[('a', 1)] | first }}",
      "{{ d | tojson(sort_keys=true) }} {{ d | tojson(indent=1, separators=(',', ':')) }} {{ 1.0 | "
      "tojson }} {{ 1e100 | tojson }} {{ 'tab\there' | tojson }}",
      "{{ 0.1 }} {{ 1e16 }} {{ 1e15 }} {{ 123456789.123 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} "
      "{{ 2.5e-10 }} {{ 1/3 }}",
      "{{ 'x' if empty else 'y' }} {{ empty or 'fallback' }} {{ 'a' and 'b' }} {{ 0 or none }} {{ "
      "not empty }} {{ 1 < 2 and 2 < 1 }}",
      "{%- macro list_items(items, sep=', ', last='') -%}{% for i in items %}{{ i }}{{ sep if not "
      "loop.last else last }}{% endfor %}{%- endmacro -%}"
      "{{ list_items(ws) }}|{{ list_items(ws, sep='; ', last='.') }}|{{ list_items([]) }}|{{ "
      "list_items(ws, '/') }}",
      "{% set ns = namespace(total=0, names=[]) %}{% for p in people if p.age is defined %}{% set "
      "ns.total = ns.total + p.age %}"
      "{% set ns.names = ns.names + [p.name] %}{% endfor %}{{ ns.total }} {{ ns.names }}",
      "{% for k, v in d.items() %}{% if v is none %}{% continue %}{% endif %}{{ k }}{{ v }}{% "
      "endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
      "{{ '{0}-{1}-{0}'.format('a', 'b') }} {{ 'Hi {name}!'.format(name='Bo') }} {{ "
      "'a{{b}}'.format() }} {{ 'x'.replace('x', '') }}",
      "{{ 'abc'.startswith(('z', 'a')) }} {{ 'abc'.endswith('bc') }} {{ '  xy  '.strip() }}|{{ "
      "'xxhixx'.strip('x') }}|{{ '\t a'.lstrip() }}",
      "{{ n ~ f ~ none ~ true }} {{ 'v=' ~ [1, 'a'] }} {{ d.get('c') is none }} {{ d.get('zz', 5) "
      "}} {{ d.keys() | list | length }}",
      "{{ xs | first }} {{ 'héllo' | first }} {{ 'héllo' | last }} {{ empty | first is undefined "
      "}} {{ xs | length }} {{ d | count }}",
      "{{ people | unique(attribute='name') | list | length if false else 'skip' }} {{ [1, 1, 2] | "
      "unique | list }} {{ 'aAb' | list | unique | list }}",
      "{{ 'hello world' | capitalize }} {{ 'hello-world foo(bar)' | title }} {{ 'x' | center(5) "
      "}}| {{ 'ab' | center(7) }}|",
      "{{ missing }}{{ missing | length }}{{ missing is undefined }}{% for x in missing %}never{% "
      "endfor %}{{ missing | default('dflt') }}",
      "{{ raise_exception('stop ' ~ n) if n > 5 }}",
      "{{ 'a' + 1 }}",
      "{{ xs.nope.deeper }}",
      "{{ [1, 2][0:1:0] }}",
  };
  std::vector<OracleCase> cases;
  for (const char* t : templates) cases.push_back({t, t, ctx});
  size_t rendered = 0;
  const size_t agreed = CompareWithOracle(cases, &rendered);
  EXPECT_EQ(agreed, cases.size());
  std::printf("language cases: %zu/%zu agree with jinja2 (%zu rendered)\n", agreed, cases.size(),
              rendered);
}

// Conversations covering what chat templates branch on.
std::vector<std::pair<std::string, Json>> Conversations() {
  const Json tools = Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city — «now»",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web",
      "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
      "return": {"type": "string"}}}])");
  std::vector<std::pair<std::string, Json>> out = {
      {"system+user", Json::parse(R"({"messages": [
          {"role": "system", "content": "You are brief."},
          {"role": "user", "content": "Hi there! \"quotes\" \\ back"}]})")},
      {"multi-turn with reasoning", Json::parse(R"({"messages": [
          {"role": "user", "content": "q1"},
          {"role": "assistant", "content": "<think>\nplan it\n</think>\n\nanswer one"},
          {"role": "user", "content": "q2 — ünïcødé 你好 🙂"},
          {"role": "assistant", "content": "answer two", "reasoning_content": "\nsteps\n"},
          {"role": "user", "content": "q3"}]})")},
      {"final assistant turn", Json::parse(R"({"messages": [
          {"role": "system", "content": "S"},
          {"role": "user", "content": "q"},
          {"role": "assistant", "content": "<think>hm</think>done"}]})")},
      {"tools and calls", Json::parse(R"({"messages": [
          {"role": "system", "content": "Use tools."},
          {"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call00001", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
          {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call00001"},
          {"role": "tool", "content": "second result", "tool_call_id": "call00001"},
          {"role": "assistant", "content": "It is 21 C."},
          {"role": "user", "content": "thanks"}]})")},
      {"string arguments", Json::parse(R"({"messages": [
          {"role": "user", "content": "find x"},
          {"role": "assistant", "content": "", "tool_calls": [
            {"id": "abcdefghi", "type": "function",
             "function": {"name": "search", "arguments": "{\"q\": \"x\"}"}},
            {"id": "abcdefgh2", "type": "function",
             "function": {"name": "search", "arguments": "{\"q\": \"y\"}"}}]},
          {"role": "tool", "content": "<tool_response>r</tool_response>"}]})")},
      {"typed content parts", Json::parse(R"({"messages": [
          {"role": "system", "content": [{"type": "text", "text": "Sys"}]},
          {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe "}]},
          {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}]})")},
      {"bad alternation", Json::parse(R"({"messages": [
          {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})")},
      {"empty", Json::parse(R"({"messages": []})")},
  };
  std::vector<std::pair<std::string, Json>> with_tools;
  for (const auto& [name, ctx] : out) {
    if (name == "tools and calls" || name == "string arguments") {
      Json c = ctx;
      c["tools"] = tools;
      with_tools.emplace_back(name + " (tools given)", c);
      c["tools_in_user_message"] = true;
      with_tools.emplace_back(name + " (tools in user message)", c);
    }
  }
  out.insert(out.end(), with_tools.begin(), with_tools.end());
  return out;
}

// Every conversation with add_generation_prompt on/off, enable_thinking absent/true/false, and the
// special tokens of a tokenizer_config.json.
std::vector<OracleCase> Expand(const std::string& tmpl_name, const std::string& tmpl) {
  std::vector<OracleCase> cases;
  for (const auto& [name, ctx] : Conversations()) {
    for (bool prompt : {true, false}) {
      for (int thinking : {-1, 1, 0}) {
        Json c = ctx;
        c["add_generation_prompt"] = prompt;
        if (thinking >= 0) c["enable_thinking"] = thinking == 1;
        c["bos_token"] = "<s>";
        c["eos_token"] = "</s>";
        c["show_summary"] = thinking == 0;
        cases.push_back({tmpl_name + " / " + name + " / prompt " + (prompt ? "on" : "off") +
                             " / thinking " + std::to_string(thinking),
                         tmpl, std::move(c)});
      }
    }
  }
  return cases;
}

TEST(JinjaTest, Qwen3TemplateMatchesJinja2) {
  TL_REQUIRE_JINJA2();
  const fs::path config = fs::path(TLALOC_SOURCE_DIR) / "data/qwen3/tokenizer_config.json";
  ASSERT_TRUE(fs::exists(config)) << config << " is tracked and must exist";
  const Json j = Json::parse(ReadFile(config));
  ASSERT_TRUE(j.contains("chat_template") && j["chat_template"].is_string());
  const auto cases = Expand("qwen3", j["chat_template"].get<std::string>());
  size_t rendered = 0;
  const size_t agreed = CompareWithOracle(cases, &rendered);
  EXPECT_EQ(agreed, cases.size());
  EXPECT_GE(rendered * 2, cases.size()) << "most cases must render, not fail";
  std::printf("qwen3 template: %zu/%zu cases agree with jinja2 (%zu rendered, the rest errors)\n",
              agreed, cases.size(), rendered);
}

TEST(JinjaTest, TlalocWrittenTemplateMatchesJinja2) {
  TL_REQUIRE_JINJA2();
  // kQwen3ChatTemplate, read from its source (the models layer is not linked here).
  const std::string src =
      ReadFile(fs::path(TLALOC_SOURCE_DIR) / "src/models/init_tokenizer_config.cc");
  const size_t b = src.find("R\"JINJA("), e = src.find(")JINJA\"");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const auto cases = Expand("tlaloc", src.substr(b + 8, e - b - 8));
  size_t rendered = 0;
  const size_t agreed = CompareWithOracle(cases, &rendered);
  EXPECT_EQ(agreed, cases.size());
  EXPECT_GE(rendered * 2, cases.size()) << "most cases must render, not fail";
  std::printf("Tlaloc's own template: %zu/%zu cases agree with jinja2 (%zu rendered)\n", agreed,
              cases.size(), rendered);
}

TEST(JinjaTest, OurTemplatesMatchJinja2) {
  TL_REQUIRE_JINJA2();
  const fs::path dir = fs::path(TLALOC_SOURCE_DIR) / "tests/tokenizer/jinja_templates";
  std::vector<OracleCase> cases;
  size_t templates = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    ++templates;
    auto more = Expand(entry.path().stem().string(), ReadFile(entry.path()));
    cases.insert(cases.end(), more.begin(), more.end());
  }
  ASSERT_GE(templates, 4u);
  size_t rendered = 0;
  const size_t agreed = CompareWithOracle(cases, &rendered);
  EXPECT_EQ(agreed, cases.size());
  EXPECT_GE(rendered * 2, cases.size()) << "most cases must render, not fail";
  std::printf("%zu templates of our own: %zu/%zu cases agree with jinja2 (%zu rendered)\n",
              templates, agreed, cases.size(), rendered);
}

}  // namespace
}  // namespace tlaloc::jinja
