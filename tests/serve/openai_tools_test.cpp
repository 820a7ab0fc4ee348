// tool_choice "auto" (src/serve/llm/openai_tools.h, ChoiceBuilder in openai_response.h): finished
// outputs read as vLLM's llama3_json / hermes parsers read them, and streams that hold text back
// while it could still be a call, from hand-made engine events.
#include "serve/llm/openai_tools.h"

#include <gtest/gtest.h>

#include "serve/llm/openai_response.h"

namespace zenith::serve::llm {
namespace {

using nlohmann::json;

const text::Tokenizer& tokenizer() {
  static auto tok = text::Tokenizer::from_dir(ZENITH_SOURCE_DIR "/examples/llm/fortunes-llama");
  return *tok;
}

std::vector<ToolFunction> weather_tools() {
  ToolFunction weather{"get_weather", "", nlohmann::ordered_json::parse(R"({"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
      "required": ["city"]})")};
  ToolFunction time{"get_time", "", nlohmann::ordered_json::object()};
  return {weather, time};
}

Request auto_request() {
  Request r;
  r.tools = weather_tools();
  r.tool_choice = "auto";
  return r;
}

Event event(const std::string& text, bool finished = false, std::string reason = "") {
  Event e;
  e.text = text;
  e.finished = finished;
  e.finish_reason = std::move(reason);
  return e;
}

TEST(OpenAiTools, AutoOutputsThatAreCalls) {
  const auto tools = weather_tools();
  auto one =
      parse_auto_tool_calls(R"( {"name": "get_weather", "parameters": {"city": "Oslo"}} )", tools);
  ASSERT_TRUE(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name, "get_weather");
  EXPECT_EQ((*one)[0].arguments, R"({"city":"Oslo"})");
  // Llama 3.1's python tag, two calls separated by ';', arguments in the model's order.
  auto two = parse_auto_tool_calls(
      R"(<|python_tag|>{"name": "get_weather", "arguments": {"days": 2, "city": "a;}"}}; )"
      R"({"name": "get_time", "arguments": {}})",
      tools);
  ASSERT_TRUE(two);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].arguments, R"({"days":2,"city":"a;}"})");
  EXPECT_EQ((*two)[1].name, "get_time");
  // A JSON list, OpenAI's arguments-as-text, and Hermes' <tool_call> tags.
  auto list = parse_auto_tool_calls(
      R"([{"name": "get_time", "arguments": "{\"tz\": \"UTC\"}"}, {"name": "get_time",
      "arguments": {}}])",
      tools);
  ASSERT_TRUE(list);
  EXPECT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].arguments, R"({"tz":"UTC"})");
  auto hermes = parse_auto_tool_calls(
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>",
      tools);
  ASSERT_TRUE(hermes);
  EXPECT_EQ(hermes->size(), 2u);
}

TEST(OpenAiTools, AutoOutputsThatAreText) {
  const auto tools = weather_tools();
  for (const char* text : {
           "It is sunny in Oslo.",
           R"({"name": "get_weather", "arguments": {"city": 3}})",         // fails the schema
           R"({"name": "get_weather", "arguments": {}})",                  // misses "city"
           R"({"name": "get_news", "arguments": {}})",                     // not a tool
           R"({"city": "Oslo"})",                                          // not a call
           R"({"name": "get_time", "arguments": {}} and then some text)",  // more after it
           R"({"name": "get_time", "arguments": {})",                      // cut short
           R"({"name": "get_time", "arguments": {}, "extra": 1})",         // unknown key
           R"({"name": "get_time", "arguments": {}, "parameters": {}})",   // both
           "[]",
           "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}",  // not closed
       })
    EXPECT_FALSE(parse_auto_tool_calls(text, tools)) << text;
  EXPECT_FALSE(parse_auto_tool_calls(R"({"name": "get_time", "arguments": {}})", {}));
  const std::string deep = R"({"name": "get_time", "arguments": {"a": )" + std::string(500, '[') +
                           std::string(500, ']') + "}}";
  EXPECT_FALSE(parse_auto_tool_calls(deep, tools));
}

TEST(OpenAiTools, WhatCouldStillBeACall) {
  for (const char* text :
       {"", "  \n", " {", "[", "<|py", "<|python_tag|>{", "<tool", "<tool_call>"})
    EXPECT_TRUE(could_be_tool_call(text)) << text;
  for (const char* text : {"Hi", " It", "<|eot", "<b>", "x{"})
    EXPECT_FALSE(could_be_tool_call(text)) << text;
}

TEST(OpenAiTools, AutoStreamSendsACallWhenTheOutputIsOne) {
  Request r = auto_request();
  ChoiceBuilder c(r, 0, tokenizer(), "call_9");
  c.role_choice();
  EXPECT_TRUE(c.add(event(" {\"name\": \"get_weather\",")).is_null());  // held back
  EXPECT_TRUE(c.add(event(" \"arguments\": {\"city\": \"Oslo\"}")).is_null());
  json last = c.add(event("}", true, "stop"));
  const json& call = last["delta"]["tool_calls"][0];
  EXPECT_EQ(call["index"], 0);
  EXPECT_EQ(call["id"], "call_9");
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"],
            json({{"name", "get_weather"}, {"arguments", "{\"city\":\"Oslo\"}"}}));
  EXPECT_FALSE(last["delta"].contains("content"));
  EXPECT_EQ(last["finish_reason"], "tool_calls");
  json message = c.final_choice()["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_FALSE(message["tool_calls"][0].contains("index"));
  EXPECT_EQ(c.final_choice()["finish_reason"], "tool_calls");
}

TEST(OpenAiTools, AutoStreamSendsTextAsSoonAsItCannotBeACall) {
  Request r = auto_request();
  ChoiceBuilder c(r, 0, tokenizer(), "call_9");
  c.role_choice();
  EXPECT_TRUE(c.add(event("  ")).is_null());  // whitespace: could still be a call
  json first = c.add(event("It is"));
  EXPECT_EQ(first["delta"], json({{"content", "  It is"}}));  // what was held, whole
  EXPECT_EQ(c.add(event(" sunny"))["delta"], json({{"content", " sunny"}}));
  json last = c.add(event("", true, "stop"));
  EXPECT_EQ(last["finish_reason"], "stop");
  EXPECT_EQ(c.final_choice()["message"],
            json({{"role", "assistant"}, {"content", "  It is sunny"}}));
}

TEST(OpenAiTools, AutoStreamJsonThatIsNotACallArrivesAsContentAtTheEnd) {
  Request r = auto_request();
  r.logprobs = true;
  ChoiceBuilder c(r, 0, tokenizer(), "call_9");
  c.role_choice();
  Event a = event("{\"city\":");
  a.logprobs = {{450, -0.5f, {}}};
  EXPECT_TRUE(c.add(a).is_null());
  Event b = event(" \"Oslo\"}", true, "stop");
  b.logprobs = {{451, -0.25f, {}}};
  json last = c.add(b);
  EXPECT_EQ(last["delta"], json({{"content", "{\"city\": \"Oslo\"}"}}));
  EXPECT_EQ(last["finish_reason"], "stop");
  EXPECT_EQ(last["logprobs"]["content"].size(), 2u);  // the held token's logprob comes with it
  EXPECT_EQ(c.final_choice()["logprobs"]["content"].size(), 2u);
}

TEST(OpenAiTools, AutoNonStreamingSeveralCallsGetTheirOwnIds) {
  Request r = auto_request();
  ChoiceBuilder c(r, 1, tokenizer(), "call_9");
  c.add(event(R"([{"name": "get_time", "arguments": {}}, )"));
  c.add(event(R"({"name": "get_weather", "arguments": {"city": "Rome"}}])", true, "stop"));
  json choice = c.final_choice();
  EXPECT_EQ(choice["index"], 1);
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["id"], "call_9");
  EXPECT_EQ(choice["message"]["tool_calls"][1]["id"], "call_9_1");
  EXPECT_EQ(choice["message"]["tool_calls"][1]["function"]["arguments"], R"({"city":"Rome"})");
}

TEST(OpenAiTools, NoneIgnoresTheTools) {
  Request r = auto_request();
  r.tool_choice = "none";
  ChoiceBuilder c(r, 0, tokenizer(), "call_9");
  json first = c.add(event(R"({"name": "get_time", )"));
  EXPECT_EQ(first["delta"]["content"], R"({"name": "get_time", )");  // streamed at once
  c.add(event(R"("arguments": {}})", true, "stop"));
  EXPECT_EQ(c.final_choice()["finish_reason"], "stop");
  EXPECT_EQ(c.final_choice()["message"]["content"], R"({"name": "get_time", "arguments": {}})");
}

}  // namespace
}  // namespace zenith::serve::llm
