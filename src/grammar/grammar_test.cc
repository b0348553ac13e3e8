// Grammars from JSON schemas: what they accept and refuse byte by byte, the schema keywords
// they refuse, and the token masks they give over a real vocabulary.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar/token_mask.h"
#include "tokenizer/hf_import.h"

namespace daisy::grammar {
namespace {

using ojson = nlohmann::ordered_json;

// Whether `text` is a whole sentence of `g` (and every prefix a live one).
bool Accepts(const Grammar& g, const std::string& text) {
  Matcher m(g);
  return m.Advance(text) && m.CanEnd();
}
bool Live(const Grammar& g, const std::string& text) {
  Matcher m(g);
  return m.Advance(text);
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 2},
    "pet": {"$ref": "#/$defs/pet"},
    "score": {"type": ["number", "null"]}
  },
  "required": ["name", "age"],
  "$defs": {"pet": {"type": "object", "properties": {"kind": {"const": "cat"}, "good": {"type": "boolean"}},
                    "required": ["kind"]}}
})";

TEST(JsonSchemaGrammar, AcceptsWhatTheSchemaAllows) {
  auto g = JsonSchemaGrammar(ojson::parse(kSchema));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Accepts(*g, R"({"name": "Ann", "age": 41})"));
  EXPECT_TRUE(Accepts(*g, R"({"name":"Ann","age":-7,"tags":["a",3],"pet":{"kind":"cat","good":true},"score":1.5e3})"));
  EXPECT_TRUE(Accepts(*g, R"( {"name": "\u00e9\n", "age": 0, "score": null})"));
  EXPECT_TRUE(Accepts(*g, R"({"name": "Zoë", "age": 1, "pet": {"kind": "cat"}})"));
  // Refused: a missing required property, order, extra properties, wrong types, bounds.
  EXPECT_FALSE(Accepts(*g, R"({"age": 41})"));
  EXPECT_FALSE(Live(*g, R"({"age": 41, "name": "x"})"));
  EXPECT_FALSE(Live(*g, R"({"name": "x", "age": 1, "extra")"));
  EXPECT_FALSE(Live(*g, R"({"name": 5)"));
  EXPECT_FALSE(Live(*g, R"({"name": "123456789)"));  // maxLength 8
  EXPECT_FALSE(Live(*g, R"({"name": "x", "age": 1, "tags": ["a", "b", )"));  // maxItems 2
  EXPECT_FALSE(Live(*g, R"({"name": "x", "age": 01)"));
  EXPECT_FALSE(Live(*g, R"({"name": "x", "age": 1, "pet": {"kind": "dog")"));
  EXPECT_FALSE(Accepts(*g, R"({"name": "x", "age": 1)"));  // not closed
  EXPECT_FALSE(Live(*g, "{\"name\": \"a\nb"));             // raw control characters
  EXPECT_FALSE(Live(*g, "{\"name\": \"\xe8\xa6\""));            // half a UTF-8 character, then the quote
  EXPECT_FALSE(Live(*g, "{\"name\": \"\xff"));                  // never UTF-8
}

TEST(JsonSchemaGrammar, RecursionAnyOfAndAnyJson) {
  auto tree = JsonSchemaGrammar(ojson::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"]}}})"));
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_TRUE(Accepts(*tree, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]})"));
  auto any = JsonSchemaGrammar(ojson::parse(R"({"anyOf": [{"type": "string"}, {"type": "object"}]})"));
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(Accepts(*any, R"("x")"));
  EXPECT_TRUE(Accepts(*any, R"({"deep": [1, {"a": null}, "s", true]})"));
  EXPECT_FALSE(Live(*any, "1"));
  const Grammar obj = JsonObjectGrammar();
  EXPECT_TRUE(Accepts(obj, R"({"a": [1, 2.5, -3e2], "b": {"c": false}})"));
  EXPECT_FALSE(Live(obj, "[1]"));
}

TEST(JsonSchemaGrammar, RefusesWhatItCannotEnforceByName) {
  auto bad = [](const char* schema) {
    auto g = JsonSchemaGrammar(ojson::parse(schema));
    EXPECT_FALSE(g.ok()) << schema;
    return g.ok() ? std::string() : g.status().message();
  };
  EXPECT_EQ(bad(R"({"type": "string", "pattern": "^a+$"})"),
            "the JSON schema keyword 'pattern' (at #) is not supported for constrained output");
  EXPECT_EQ(bad(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}})"),
            "the JSON schema keyword 'minimum' (at #/properties/n) is not supported for constrained output");
  EXPECT_NE(bad(R"({"type": "date"})").find("is not one of string"), std::string::npos);
  EXPECT_NE(bad(R"({"$ref": "https://example.com/s.json"})").find("only references into the schema itself"), std::string::npos);
  EXPECT_NE(bad(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})").find("not among the properties"),
            std::string::npos);
  EXPECT_EQ(bad(R"({"type": "string", "maxLength": 30141})"),
            "minLength/maxLength above 10000 at # are not supported");
}

// Found by fuzz_json_schema: a long string bound was built by recursion as deep as the bound
// and overflowed the stack (ASan: maxLength 30141). Now a chain of rules, built in a loop.
TEST(JsonSchemaGrammar, LongLengthBoundsAreEnforcedWithoutRecursion) {
  auto g = JsonSchemaGrammar(ojson::parse(R"({"type": "string", "minLength": 2, "maxLength": 10000})"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Accepts(*g, "\"" + std::string(10000, 'x') + "\""));
  EXPECT_FALSE(Accepts(*g, "\"" + std::string(10001, 'x') + "\""));
  EXPECT_FALSE(Accepts(*g, "\"x\""));
  EXPECT_TRUE(Accepts(*g, "\"xy\""));
  auto items = JsonSchemaGrammar(ojson::parse(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})"));
  ASSERT_TRUE(items.ok());
  EXPECT_TRUE(Accepts(*items, "[1,2,3]"));
  EXPECT_FALSE(Accepts(*items, "[1,2,3,4]"));
  EXPECT_FALSE(Accepts(*items, "[]"));
}

TEST(ToolCallGrammar, ForcesACallOfOneOfTheTools) {
  const ojson tools = ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}])");
  auto g = ToolCallGrammar(tools, {"<tool_call>\n", "\n</tool_call>", "arguments"});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Accepts(*g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_TRUE(Accepts(*g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(Live(*g, "<tool_call>\n{\"name\": \"other\""));
  EXPECT_FALSE(Live(*g, "Sure"));
}

TEST(TokenMask, TokensThatKeepTheGrammarAliveAndEndOnlyWhenComplete) {
  auto tok = tokenizer::Tokenizer::Create(tokenizer::BuiltinByteVocab());
  ASSERT_TRUE(tok.ok());
  auto g = JsonSchemaGrammar(ojson::parse(R"({"type": "object", "properties": {"ok": {"type": "boolean"}},
                                              "required": ["ok"]})"));
  ASSERT_TRUE(g.ok());
  auto vocab = std::make_shared<TokenVocab>(*tok, std::vector<int32_t>{});
  auto grammar = std::make_shared<Grammar>(std::move(*g));
  TokenConstraint c(grammar, vocab);
  // Brute force: a token is allowed exactly when its bytes continue the grammar.
  auto check = [&](const std::string& prefix) {
    Matcher m(*grammar);
    ASSERT_TRUE(m.Advance(prefix));
    const TokenMask mask = vocab->Allowed(m);
    for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
      Matcher t = m;
      const bool want = vocab->is_eog(id) ? m.CanEnd() : !vocab->bytes(id).empty() && t.Advance(vocab->bytes(id));
      EXPECT_EQ(mask.Has(id), want) << "token " << id << " after '" << prefix << "'";
    }
  };
  check("");
  check("{\"ok\": t");
  check("{\"ok\": true");
  check("{\"ok\": true}");
  // Settling tokens: the EOS comes only at the end.
  const int32_t eos = tok->eos_id();
  EXPECT_FALSE(c.Next().Has(eos));
  for (int32_t t : tok->Encode("{\"ok\": false}", false, false)) ASSERT_TRUE(c.Accept(t)) << t;
  EXPECT_TRUE(c.Complete());
  EXPECT_TRUE(c.Next().Has(eos));
  int eogs = 0;
  for (int32_t id = 0; id < vocab->n_vocab(); ++id) eogs += vocab->is_eog(id);
  EXPECT_EQ(c.Next().Count(), eogs);  // nothing but an end
  EXPECT_FALSE(c.Accept(tok->Encode("x", false, false)[0]));
}

}  // namespace
}  // namespace daisy::grammar
