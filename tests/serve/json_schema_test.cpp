// The JSON Schema subset: what compiles, the errors naming unsupported keywords, the validator,
// and the byte-level automaton on hand-written texts.
#include "serve/llm/json_schema.h"

#include <gtest/gtest.h>

#include "serve/llm/constraint.h"
#include "serve/llm/json_grammar.h"
#include "serve/llm/json_schema_compile.h"

namespace zenith::serve::llm {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Whether the automaton for `schema` accepts `text` as a whole value.
bool accepts(const ojson& schema, const std::string& text) {
  Grammar g = compile_json_schema(schema);
  JsonState s = JsonState::start(g);
  for (char c : text)
    if (!s.step(g, uint8_t(c))) return false;
  return s.complete(g);
}

SchemaError schema_error(const ojson& schema) {
  try {
    compile_json_schema(schema);
  } catch (const SchemaError& e) {
    return e;
  }
  ADD_FAILURE() << "no SchemaError for " << schema.dump();
  return SchemaError("", "", "");
}

TEST(JsonSchemaGrammar, ObjectsInSchemaOrderWithOptionalPropertiesLeftOut) {
  ojson schema = ojson::parse(R"({"type":"object","properties":{
      "b":{"type":"integer"},"a":{"type":"string"},"c":{"type":"boolean"}},
      "required":["a"],"additionalProperties":false})");
  EXPECT_TRUE(accepts(schema, R"({"b":-12,"a":"x","c":true})"));
  EXPECT_TRUE(accepts(schema, R"({"a":"x"})"));
  EXPECT_TRUE(accepts(schema, R"({"b":0,"a":""})"));
  EXPECT_FALSE(accepts(schema, R"({"a":"x","b":1})"));  // out of order
  EXPECT_FALSE(accepts(schema, R"({"b":1})"));          // a is required
  EXPECT_FALSE(accepts(schema, R"({"a": "x"})"));       // no whitespace
  EXPECT_FALSE(accepts(schema, R"({"a":"x","d":1})"));
  EXPECT_FALSE(accepts(schema, R"({"b":01,"a":"x"})"));
  EXPECT_FALSE(accepts(schema, R"({"a":"x"})"
                               "\n"));
}

TEST(JsonSchemaGrammar, StringsNumbersAndLiterals) {
  ojson s = ojson::parse(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(accepts(s, "\"ab\""));
  EXPECT_TRUE(accepts(s, "\"\\u00e9\\n\xc3\xa9\""));  // three code points
  EXPECT_FALSE(accepts(s, "\"a\""));
  EXPECT_FALSE(accepts(s, "\"abcd\""));
  ojson text = ojson::parse(R"({"type":"string"})");
  EXPECT_FALSE(accepts(text, "\"\\ud800\""));   // no surrogate escapes
  EXPECT_FALSE(accepts(text, "\"\xc0\xaf\""));  // overlong
  EXPECT_FALSE(accepts(text, "\"\xed\xa0\x80\""));
  EXPECT_FALSE(accepts(text, "\"a\tb\""));  // control characters must be escaped
  EXPECT_TRUE(accepts(text, "\"\xf0\x9f\x98\x80\\\"\""));
  ojson number = ojson::parse(R"({"type":"number"})");
  for (const char* ok : {"0", "-0.5", "12e3", "1.25E-7", "-3"}) EXPECT_TRUE(accepts(number, ok));
  for (const char* bad : {"01", "1.", ".5", "1e", "+1", "1e123"})
    EXPECT_FALSE(accepts(number, bad)) << bad;
  ojson integer = ojson::parse(R"({"type":"integer"})");
  EXPECT_FALSE(accepts(integer, "1.5"));
  EXPECT_TRUE(accepts(integer, "123456789012345678"));
  EXPECT_FALSE(accepts(integer, "1234567890123456789"));  // 19 digits: past int64's safe range
  ojson e = ojson::parse(R"({"enum":[1,12,"x",null,{"k":[true]}]})");
  for (const char* ok : {"1", "12", "\"x\"", "null", "{\"k\":[true]}"})
    EXPECT_TRUE(accepts(e, ok)) << ok;
  EXPECT_FALSE(accepts(e, "123"));
  EXPECT_TRUE(accepts(ojson::parse(R"({"type":"array","items":{"enum":[1,12]}})"), "[1,12,1]"));
}

TEST(JsonSchemaGrammar, NumberBounds) {
  ojson month = ojson::parse(R"({"type":"integer","minimum":1,"maximum":12})");
  for (const char* ok : {"1", "7", "10", "12"}) EXPECT_TRUE(accepts(month, ok)) << ok;
  for (const char* bad : {"0", "13", "-1", "1.0"}) EXPECT_FALSE(accepts(month, bad)) << bad;
  ojson count = ojson::parse(R"({"type":"integer","minimum":0})");
  EXPECT_TRUE(accepts(count, "0"));
  EXPECT_TRUE(accepts(count, "907"));
  EXPECT_FALSE(accepts(count, "-1"));
  ojson positive = ojson::parse(R"({"type":"integer","exclusiveMinimum":0})");
  EXPECT_FALSE(accepts(positive, "0"));
  EXPECT_TRUE(accepts(positive, "10"));
  ojson price = ojson::parse(R"({"type":"number","minimum":0})");
  EXPECT_TRUE(accepts(price, "0.5"));
  EXPECT_FALSE(accepts(price, "-0.5"));
  // A string or a positive integer: the bound makes their first bytes differ from a lone "-".
  EXPECT_TRUE(accepts(ojson::parse(R"({"anyOf":[{"type":"integer","minimum":1},
                                               {"enum":[0,-1]}]})"),
                      "-1"));
  EXPECT_EQ(schema_error(ojson::parse(R"({"type":"integer","minimum":5})")).keyword, "minimum");
  EXPECT_EQ(schema_error(ojson::parse(R"({"type":"number","maximum":3})")).pointer, "/maximum");
  EXPECT_EQ(schema_error(ojson::parse(R"({"type":"integer","minimum":3,"maximum":2})")).keyword,
            "minimum");
}

TEST(JsonSchemaGrammar, ArraysAnyOfRefsAndTypeLists) {
  ojson s = ojson::parse(R"({"type":"array","items":{"type":["string","null"]},
                             "minItems":1,"maxItems":2})");
  EXPECT_TRUE(accepts(s, R"(["a",null])"));
  EXPECT_FALSE(accepts(s, "[]"));
  EXPECT_FALSE(accepts(s, R"([null,null,null])"));
  ojson r = ojson::parse(R"({"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}},
      "required":["x"]}},"type":"object","properties":{"a":{"$ref":"#/$defs/p"},
      "b":{"anyOf":[{"$ref":"#/$defs/p"},{"type":"array","items":{"type":"integer"}}]}},
      "required":["a","b"]})");
  EXPECT_TRUE(accepts(r, R"({"a":{"x":1.5},"b":[1,2]})"));
  EXPECT_TRUE(accepts(r, R"({"a":{"x":1},"b":{"x":2}})"));
  EXPECT_FALSE(accepts(r, R"({"a":{"x":1},"b":"s"})"));
}

// json_object nests as deep as the state's frames allow; past that only scalars and closing
// brackets are allowed, never nothing.
TEST(JsonSchemaGrammar, AnyObjectNestsToTheLimitWithoutDeadEnds) {
  Grammar g = any_object_grammar();
  JsonState s = JsonState::start(g);
  std::string text = "{\"a\":";
  for (char c : text) ASSERT_TRUE(s.step(g, uint8_t(c)));
  int opened = 0;
  for (;; ++opened) {
    JsonState copy = s;
    if (!copy.step(g, uint8_t('['))) break;
    s = copy;
  }
  EXPECT_EQ(opened, kMaxDepth - 1);
  // The innermost array has no frame left for an item: it can only close.
  for (char c : std::string("\"{1[")) EXPECT_FALSE(JsonState(s).step(g, uint8_t(c)));
  for (char c : std::string("],{},\"x\",-1.5")) ASSERT_TRUE(s.step(g, uint8_t(c)));
  for (int i = 1; i < opened; ++i) ASSERT_TRUE(s.step(g, uint8_t(']')));
  EXPECT_FALSE(s.complete(g));
  ASSERT_TRUE(s.step(g, uint8_t('}')));
  EXPECT_TRUE(s.complete(g));
  EXPECT_TRUE(s.closed());
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreNamedWithTheirPointer) {
  SchemaError e = schema_error(
      ojson::parse(R"({"type":"object","properties":{"name":{"type":"string","pattern":"^a"}}})"));
  EXPECT_EQ(e.keyword, "pattern");
  EXPECT_EQ(e.pointer, "/properties/name/pattern");
  EXPECT_NE(std::string(e.what()).find("/properties/name/pattern"), std::string::npos);
  EXPECT_EQ(schema_error(ojson::parse(R"({"type":"integer","multipleOf":2})")).keyword,
            "multipleOf");
  EXPECT_EQ(schema_error(ojson::parse(R"({"allOf":[{}]})")).keyword, "allOf");
  EXPECT_EQ(schema_error(ojson::parse(R"({"type":"strin"})")).keyword, "type");
  SchemaError alike = schema_error(
      ojson::parse(R"({"anyOf":[{"type":"object"},{"type":"object","properties":{}}]})"));
  EXPECT_EQ(alike.keyword, "anyOf");
  EXPECT_EQ(alike.pointer, "/anyOf");
  EXPECT_EQ(schema_error(ojson::parse(R"({"$defs":{"n":{"type":"array","items":
      {"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"})"))
                .keyword,
            "$ref");
  EXPECT_EQ(schema_error(ojson::parse(R"({"properties":{"a":{}},"required":["b"]})")).pointer,
            "/required/0");
  // Bounds on what a hostile schema may cost.
  ojson many = ojson::array();
  for (int i = 0; i < 1001; ++i) many.push_back(i);
  EXPECT_EQ(schema_error(ojson{{"enum", many}}).keyword, "enum");
  ojson doubling = {{"$defs", {{"d0", {{"type", "integer"}}}}}};
  for (int k = 1; k <= 20; ++k) {
    std::string prev = "#/$defs/d" + std::to_string(k - 1);
    doubling["$defs"]["d" + std::to_string(k)] = {
        {"type", "object"}, {"properties", {{"x", {{"$ref", prev}}}, {"y", {{"$ref", prev}}}}}};
  }
  doubling["$ref"] = "#/$defs/d20";
  EXPECT_NE(std::string(schema_error(doubling).what()).find("grammar nodes"), std::string::npos);
  // Annotations pass.
  EXPECT_NO_THROW(compile_json_schema(ojson::parse(
      R"({"title":"t","description":"d","type":"object","properties":{},"strict":true})")));
}

TEST(JsonSchemaValidator, ChecksTheSubset) {
  json schema = json::parse(R"({"type":"object","properties":{
      "n":{"type":"integer"},"s":{"type":"string","maxLength":2},
      "l":{"type":"array","items":{"enum":["a","b"]},"maxItems":2},
      "o":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/x"}]}},
      "required":["n"],"additionalProperties":false,
      "$defs":{"x":{"type":"object","properties":{"k":{"const":1}},"required":["k"]}}})");
  EXPECT_EQ(validate_json(json::parse(R"({"n":1,"s":"ab","l":["a"],"o":{"k":1}})"), schema),
            std::nullopt);
  EXPECT_EQ(validate_json(json::parse(R"({"n":2.0})"), schema), std::nullopt);
  EXPECT_TRUE(validate_json(json(1), json::parse(R"({"anyOf":[{"$ref":"#"}]})")));
  EXPECT_TRUE(validate_json(json(1), json::parse(R"({"anyOf":[{"$ref":"#"},{"$ref":"#"}]})")));
  json bounded = json::parse(R"({"type":"number","minimum":0,"exclusiveMaximum":1})");
  EXPECT_EQ(validate_json(json(0), bounded), std::nullopt);
  EXPECT_TRUE(validate_json(json(1), bounded));
  EXPECT_TRUE(validate_json(json(-0.5), bounded));
  EXPECT_TRUE(validate_json(json::parse(R"({"n":1.5})"), schema));
  EXPECT_TRUE(validate_json(json::parse(R"({"s":"a"})"), schema));
  EXPECT_TRUE(validate_json(json::parse(R"({"n":1,"s":"abc"})"), schema));
  EXPECT_TRUE(validate_json(json::parse(R"({"n":1,"l":["c"]})"), schema));
  EXPECT_TRUE(validate_json(json::parse(R"({"n":1,"o":{"k":2}})"), schema));
  EXPECT_TRUE(validate_json(json::parse(R"({"n":1,"x":0})"), schema));
  EXPECT_EQ(*validate_json(json::parse(R"({"n":1,"l":["a",3]})"), schema).value().begin(), '/');
}

}  // namespace
}  // namespace zenith::serve::llm
