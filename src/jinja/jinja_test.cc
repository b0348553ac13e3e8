// The Jinja engine against what Python's Jinja2 (configured as transformers configures it)
// prints for the same templates: whitespace rules, scoping, operators, filters, tests and
// methods, Python's printing, and errors that name the construct. (The real chat templates are
// compared byte for byte with python3-jinja2 in tests/parity/chat_template_parity.mjs.)
#include "jinja/jinja.h"

#include <gtest/gtest.h>

namespace daisy::jinja {
namespace {

std::string Render(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  auto t = Template::Parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto out = t->Render(FromJson(vars));
  if (!out.ok()) return "ERROR: " + out.status().message();
  return *out;
}

TEST(Jinja, WhitespaceRulesAsTransformersSetsThem) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the indentation before it.
  EXPECT_EQ(Render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(Render("    {% if true %}\n  x\n    {% endif %}\n"), "  x\n");
  // Not for expressions; '-' strips every whitespace, '+' keeps.
  EXPECT_EQ(Render("a  {{ 'b' }}  c"), "a  b  c");
  EXPECT_EQ(Render("a \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(Render("{% if true +%}\nx{% endif %}"), "\nx");
  EXPECT_EQ(Render("  {%+ if true %}x{% endif %}"), "  x");
  // Comments behave as blocks.
  EXPECT_EQ(Render("  {# note #}\nx"), "x");
  // Between two tags on one line, spaces stay (not at a line start).
  EXPECT_EQ(Render("{% if true %}x{% endif %}  {% if true %}y{% endif %}"), "x  y");
}

TEST(Jinja, PrintsAsPython) {
  EXPECT_EQ(Render("{{ none }}|{{ true }}|{{ [1, 'a', none] }}|{{ {'a': 1} }}|{{ 1.0 }}|{{ 1e-5 }}|{{ 1e20 }}"),
            "None|True|[1, 'a', None]|{'a': 1}|1.0|1e-05|1e+20");
  EXPECT_EQ(Render("{{ 10 / 4 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}|{{ 1e16 }}"), "2.5|3|-4|2|1024|1e+16");
  EXPECT_EQ(Render("{{ (1, 2) }}|{{ '%s-%d' % ('a', 3) }}|{{ 'a' ~ 1 ~ none }}|{{ x }}"), "(1, 2)|a-3|a1None|");
  EXPECT_EQ(Render("{{ 0.1 + 0.2 }}|{{ 123456789012345678.0 }}"), "0.30000000000000004|1.2345678901234568e+17");
}

TEST(Jinja, ScopesAsJinja) {
  // A for body is a fresh scope each iteration; outer names stay visible, sets do not leak.
  EXPECT_EQ(Render("{% for i in [1,2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}"), "[]");
  EXPECT_EQ(Render("{% set x = 5 %}{% for i in [1,2] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}"), "[5][5]5");
  // Namespaces carry state out of loops; an if does not make a scope.
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(Render("{% if true %}{% set y = 2 %}{% endif %}{{ y }}"), "2");
  // Macros see top-level variables set before the call; defaults and keywords.
  EXPECT_EQ(Render("{% macro m(a, b=2) %}{{ a }}-{{ b }}-{{ y }}{% endmacro %}{% set y = 3 %}{{ m(1) }}{{ m(1, b=5) }}"),
            "1-2-31-5-3");
}

TEST(Jinja, LoopsFiltersTestsAndMethods) {
  EXPECT_EQ(Render("{% for x in xs %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
                   {{"xs", {"a", "b"}}}),
            "0TrueFalse2;1FalseTrue2;");
  EXPECT_EQ(Render("{% for x in xs if x > 1 %}{{ x }}{{ loop.index }}{% else %}none{% endfor %}", {{"xs", {1, 2, 3}}}),
            "2132");
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(Render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}), "b=1;a=2;");
  EXPECT_EQ(Render("{{ 'abc'[1:] }}|{{ [1,2,3][::-1] }}|{{ 'a,b'.split(',') }}|{{ ' x '.strip() }}|{{ 'héllo'[1] }}"),
            "bc|[3, 2, 1]|['a', 'b']|x|é");
  EXPECT_EQ(Render("{{ '  a b  '.split() }}|{{ 'x\\n\\ny'.rstrip('y') }}|{{ 'ab'.startswith(('x', 'a')) }}"),
            "['a', 'b']|x\n\n|True");
  EXPECT_EQ(Render("{{ xs | selectattr('on') | map(attribute='n') | join(', ') }}",
                   {{"xs", {{{"n", "a"}, {"on", true}}, {{"n", "b"}, {"on", false}}, {{"n", "c"}, {"on", true}}}}}),
            "a, c");
  EXPECT_EQ(Render("{{ xs | selectattr('role', 'equalto', 'user') | list | length }}",
                   {{"xs", {{{"role", "user"}}, {{"role", "tool"}}}}}),
            "1");
  EXPECT_EQ(Render("{{ 'héllo' | length }}|{{ none | trim }}|{{ x | default('d') }}|{{ '' | default('d', true) }}"),
            "5|None|d|d");
  EXPECT_EQ(Render("{{ 3 is divisibleby 3 }}{{ [] is iterable }}{{ {} is mapping }}{{ none is none }}{{ true is number }}"
                   "{{ true is integer }}{{ x is not defined }}{{ 'a' is string }}"),
            "TrueTrueTrueTrueTrueFalseTrueTrue");
  EXPECT_EQ(Render("{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in d }}{{ 'z' not in d }}", {{"d", {{"k", 1}}}}),
            "TrueTrueTrueTrue");
  EXPECT_EQ(Render("{{ 'a' if x else 'b' }}|{{ 'a' if x }}|{{ x or 'y' }}|{{ 0 and 1 }}"), "b||y|0");
  EXPECT_EQ(Render("{{ d.get('a') }}{{ d.get('z', 7) }}{{ d['a'] }}{{ d.a }}{{ d.z }}", {{"d", {{"a", 1}}}}), "1711");
  EXPECT_EQ(Render("{{ 'hello {}!'.format('you') }}|{{ '%s'|format(5) }}|{{ 'Hi There'|lower|upper }}"), "hello you!|5|HI THERE");
  EXPECT_EQ(Render("{% set x %}captured {{ 1 }}{% endset %}[{{ x }}]{% filter upper %}up{% endfilter %}"), "[captured 1]UP");
  EXPECT_EQ(Render("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
  EXPECT_EQ(Render("{{ 'a\\tb\\u00e9' }}"), "a\tb\xc3\xa9");
}

TEST(Jinja, TojsonAsTransformers) {
  // json.dumps(ensure_ascii=False): key order kept, non-ASCII kept, Python's float repr.
  const nlohmann::ordered_json d = nlohmann::ordered_json::parse(R"({"b":1,"a":[1,2.5,null,true,"é\"\n"],"c":{}})");
  EXPECT_EQ(Render("{{ d | tojson }}", {{"d", d}}), "{\"b\": 1, \"a\": [1, 2.5, null, true, \"é\\\"\\n\"], \"c\": {}}");
  EXPECT_EQ(Render("{{ d | tojson(indent=2) }}", {{"d", {{"a", {1, 2}}, {"e", nlohmann::ordered_json::array()}}}}),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"e\": []\n}");
  EXPECT_EQ(Render("{{ d | tojson(sort_keys=true) }}", {{"d", {{"b", 1}, {"a", 1e-05}}}}), "{\"a\": 1e-05, \"b\": 1}");
  // Integers past int64 (JSON allows them) stay exact, as Python's do.
  EXPECT_EQ(Render("{{ d | tojson }} {{ d.n }}", {{"d", nlohmann::ordered_json::parse(R"({"n": 12345678901234567890})")}}),
            "{\"n\": 12345678901234567890} 12345678901234567890");
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  EXPECT_EQ(Render("{{ raise_exception('roles must alternate') }}"),
            "ERROR: template line 1: the template raised an error: roles must alternate");
  EXPECT_EQ(Render("x\n{% include 'a' %}"), "PARSE ERROR: template line 2: the {% include %} statement is not supported");
  EXPECT_EQ(Render("{{ x | frobnicate }}"), "PARSE ERROR: template line 1: the filter 'frobnicate' is not supported");
  EXPECT_EQ(Render("{% if x is frob %}{% endif %}"), "PARSE ERROR: template line 1: the test 'frob' is not supported");
  EXPECT_EQ(Render("{% if true %}"), "PARSE ERROR: template line 1: the template ends inside a block (expected {% endif %})");
  EXPECT_EQ(Render("{{ 'x' + 1 }}"), "ERROR: template line 1: unsupported operand types for +: 'str' and 'int'");
  EXPECT_EQ(Render("\n\n{{ m.role }}"), "ERROR: template line 3: 'm' is undefined (reading .role)");
  EXPECT_EQ(Render("{{ 'x'.zfill(3) }}"), "ERROR: template line 1: 'str' object has no method 'zfill' (not supported)");
  EXPECT_EQ(Render("{{ xs.append(1) }}", {{"xs", nlohmann::ordered_json::array()}}),
            "ERROR: template line 1: lists cannot be modified in a chat template (append(): the sandbox is immutable)");
  EXPECT_EQ(Render("{% set x.y = 1 %}", {{"x", {{"y", 0}}}}),
            "ERROR: template line 1: cannot set an attribute of 'x' (only of a namespace())");
  EXPECT_EQ(Render("{{ 'unclosed }}"), "PARSE ERROR: template line 1: a string literal is never closed");
  // Bounded: deep nesting, a recursive macro and a huge repetition fail instead of exhausting
  // the stack or memory.
  EXPECT_EQ(Render("{{ " + std::string(100, '(') + "1" + std::string(100, ')') + " }}"),
            "PARSE ERROR: template line 1: expressions nested deeper than 64 levels");
  std::string ifs;
  for (int i = 0; i < 100; ++i) ifs += "{% if true %}";
  EXPECT_EQ(Render(ifs), "PARSE ERROR: template line 1: blocks nested deeper than 64 levels");
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 100; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_EQ(JsonDepth(deep), 101u);
  EXPECT_NE(Render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}").find("nested deeper than"), std::string::npos);
  EXPECT_NE(Render("{{ 'x' * 100000000 }}").find("too long"), std::string::npos);
}

}  // namespace
}  // namespace daisy::jinja
