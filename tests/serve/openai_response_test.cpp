// OpenAI response bodies and stream framing (src/serve/llm/openai_response.h), from hand-made
// engine events.
#include "serve/llm/openai_response.h"

#include <gtest/gtest.h>

#include "serve/llm/constraint.h"

namespace zenith::serve::llm {
namespace {

using nlohmann::json;

const text::Tokenizer& tokenizer() {
  static auto tok = text::Tokenizer::from_dir(ZENITH_SOURCE_DIR "/examples/llm/fortunes-llama");
  return *tok;
}

Event text_event(const std::string& text, bool finished = false, std::string reason = "") {
  Event e;
  e.text = text;
  e.finished = finished;
  e.finish_reason = std::move(reason);
  if (finished) {
    e.prompt_tokens = 11;
    e.completion_tokens = 4;
    e.cached_tokens = 8;
  }
  return e;
}

TEST(OpenAiResponse, ErrorEnvelopeAndSseFraming) {
  const json e = error_body({404, "The model 'x' does not exist", "model", "model_not_found"});
  EXPECT_EQ(e, json::parse(R"({"error":{"message":"The model 'x' does not exist",
      "type":"not_found_error","param":"model","code":"model_not_found"}})"));
  EXPECT_TRUE(error_body({400, "bad", "", ""})["error"]["param"].is_null());
  EXPECT_EQ(error_body({429, "full", "", ""})["error"]["type"], "rate_limit_error");
  EXPECT_EQ(sse_event({{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
  EXPECT_EQ(std::string(kSsePing).substr(0, 1), ":");  // a comment: clients skip it
}

TEST(OpenAiResponse, ChatStreamChunks) {
  Request r;
  r.chat = true;
  r.include_usage = true;
  ChoiceBuilder c(r, 0, tokenizer(), "call_1");
  const ResponseHead head{"chatcmpl-1", 1700000000, "m"};
  json first = chunk_json(r, head, json::array({c.role_choice()}));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["usage"].is_null());
  EXPECT_TRUE(first.contains("usage"));
  // A token whose text is held back: still a chunk (one a token), its content "".
  EXPECT_EQ(c.add(text_event(""))["delta"], json({{"content", ""}}));
  json mid = c.add(text_event("Hello"));
  EXPECT_EQ(mid["delta"], json({{"content", "Hello"}}));
  EXPECT_TRUE(mid["finish_reason"].is_null());
  json last = c.add(text_event(" you", true, "length"));
  EXPECT_EQ(last["finish_reason"], "length");
  std::vector<ChoiceBuilder> all{c};
  json usage = usage_chunk_json(r, head, total_usage(all));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"], json::parse(R"({"prompt_tokens":11,"completion_tokens":4,
      "total_tokens":15,"prompt_tokens_details":{"cached_tokens":8}})"));
  json whole = response_json(r, head, all);
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"],
            json({{"role", "assistant"}, {"content", "Hello you"}}));
  EXPECT_TRUE(whole["choices"][0]["logprobs"].is_null());
}

TEST(OpenAiResponse, TokenTextIsTheTokenInTheMiddleOfAText) {
  const auto ids = tokenizer().encode("to be", false);  // "▁to", "▁be"
  std::string joined;
  for (int32_t id : ids) joined += token_text(tokenizer(), id);
  EXPECT_EQ(joined, " to be");
}

TEST(OpenAiResponse, LogprobsInBothFormats) {
  const int64_t hello = tokenizer().encode("Hello", false).front();
  Event e = text_event(token_text(tokenizer(), hello), true, "stop");
  e.logprobs = {{hello, -0.25f, {{hello, -0.25f}, {2, -3.0f}}}};
  Request chat;
  chat.logprobs = true;
  chat.top_logprobs = 2;
  ChoiceBuilder c(chat, 0, tokenizer(), "call_1");
  json delta = c.add(e);
  const json& entry = delta["logprobs"]["content"][0];
  EXPECT_EQ(entry["token"], token_text(tokenizer(), hello));
  EXPECT_EQ(entry["logprob"], -0.25);
  EXPECT_EQ(entry["bytes"].size(), token_text(tokenizer(), hello).size());
  EXPECT_EQ(entry["top_logprobs"].size(), 2u);
  EXPECT_EQ(entry["top_logprobs"][1]["logprob"], -3.0);
  EXPECT_EQ(c.final_choice()["logprobs"]["content"].size(), 1u);

  Request completion;
  completion.chat = false;
  completion.logprobs = true;
  completion.top_logprobs = 1;
  ChoiceBuilder k(completion, 0, tokenizer(), "call_1");
  json choice = k.add(e);
  EXPECT_EQ(choice["text"], token_text(tokenizer(), hello));
  EXPECT_EQ(choice["logprobs"]["token_logprobs"], json::array({-0.25}));
  EXPECT_EQ(choice["logprobs"]["text_offset"], json::array({0}));
  EXPECT_EQ(choice["logprobs"]["top_logprobs"][0].size(), 1u);
  EXPECT_EQ(k.final_choice()["logprobs"]["tokens"].size(), 1u);

  // A sampled token outside the top k is added to its position's top_logprobs (k + 1 entries),
  // as OpenAI's legacy completions and vLLM do; logprobs 0 gives just the token itself.
  const int64_t cat = tokenizer().encode(" cat", false).back();
  Event rare = text_event(token_text(tokenizer(), hello), true, "stop");
  rare.logprobs = {{hello, -4.5f, {{cat, -0.5f}, {cat + 1, -1.5f}}}};
  ChoiceBuilder r(completion, 0, tokenizer(), "call_1");
  const json top = r.add(rare)["logprobs"]["top_logprobs"][0];
  ASSERT_EQ(top.size(), 2u) << top.dump();
  EXPECT_EQ(top[token_text(tokenizer(), cat)], -0.5);
  EXPECT_EQ(top[token_text(tokenizer(), hello)], -4.5);
  completion.top_logprobs = 0;
  ChoiceBuilder zero(completion, 0, tokenizer(), "call_1");
  EXPECT_EQ(zero.add(rare)["logprobs"]["top_logprobs"][0],
            json({{token_text(tokenizer(), hello), -4.5}}));
}

TEST(OpenAiResponse, NamedToolCallStreamsItsArguments) {
  Request r;
  r.tools = {{"get_weather", "", json::object()}};
  r.tool_choice = "function";
  r.tool_name = "get_weather";
  ChoiceBuilder c(r, 0, tokenizer(), "call_7");
  json role = c.role_choice();
  EXPECT_EQ(role["delta"], json({{"role", "assistant"}}));
  json first = c.add(text_event("{\"city\":"));
  const json& call = first["delta"]["tool_calls"][0];
  EXPECT_EQ(call["id"], "call_7");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "{\"city\":");
  json last = c.add(text_event("\"Paris\"}", true, "stop"));
  EXPECT_EQ(last["delta"]["tool_calls"][0]["function"]["arguments"], "\"Paris\"}");
  EXPECT_FALSE(last["delta"]["tool_calls"][0].contains("id"));
  EXPECT_EQ(last["finish_reason"], "tool_calls");
  json message = c.final_choice()["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
}

TEST(OpenAiResponse, RequiredToolCallHoldsBackTheClosingBrace) {
  Request r;
  r.tools = {{"a", "", json::object()}, {"get_weather", "", json::object()}};
  r.tool_choice = "required";
  ChoiceBuilder c(r, 0, tokenizer(), "call_7");
  c.role_choice();
  EXPECT_TRUE(c.add(text_event("{\"name\":\"get_")).is_null());  // the name is not known yet
  std::string args;
  json a = c.add(text_event("weather\",\"arguments\":{\"city\""));
  EXPECT_EQ(a["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
  args += a["delta"]["tool_calls"][0]["function"]["arguments"].get<std::string>();
  json b = c.add(text_event(":\"Oslo\"}}", true, "stop"));
  args += b["delta"]["tool_calls"][0]["function"]["arguments"].get<std::string>();
  EXPECT_EQ(args, "{\"city\":\"Oslo\"}");
  EXPECT_EQ(c.final_choice()["message"]["tool_calls"][0]["function"]["arguments"],
            "{\"city\":\"Oslo\"}");
}

}  // namespace
}  // namespace zenith::serve::llm
