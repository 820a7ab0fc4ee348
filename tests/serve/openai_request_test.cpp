// OpenAI request bodies (src/serve/llm/openai_request.h, openai_prompt.h): every client mistake
// is an ApiError naming the field, with the status OpenAI would answer.
#include "serve/llm/openai_request.h"

#include <gtest/gtest.h>

#include "serve/llm/openai_prompt.h"

namespace zenith::serve::llm {
namespace {

using nlohmann::json;

// The ApiError parse_request throws for `body`; fails the test when it throws none.
ApiError error_of(const std::string& body, bool chat = true) {
  try {
    parse_request(body, chat);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.substr(0, 200);
  return {};
}

std::string chat_with(const json& extra) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  if (extra.is_object()) body.update(extra);
  return body.dump();
}

TEST(OpenAiRequest, ParsesAChatRequest) {
  Request r = parse_request(chat_with({{"max_completion_tokens", 7},
                                       {"temperature", 0.5},
                                       {"top_p", 0.9},
                                       {"top_k", 40},
                                       {"seed", 3},
                                       {"n", 2},
                                       {"stop", "END"},
                                       {"logprobs", true},
                                       {"top_logprobs", 3},
                                       {"stream", true},
                                       {"stream_options", {{"include_usage", true}}},
                                       {"user", "u1"},
                                       {"some_future_field", {1, 2}}}),
                            true);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.seed, 3u);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.stream && r.include_usage);
}

TEST(OpenAiRequest, ReadsContentPartsToolMessagesAndDeveloperRole) {
  Request r = parse_request(
      json{{"model", "m"},
           {"messages",
            {{{"role", "developer"}, {"content", "be brief"}},
             {{"role", "user"},
              {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
             {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({1})}},
             {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "42"}}}}}
          .dump(),
      true);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_FALSE(r.messages[2].tool_calls.is_null());
  EXPECT_EQ(r.messages[3].tool_call_id, "call_1");
}

TEST(OpenAiRequest, MaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(
      parse_request(chat_with({{"max_tokens", 5}, {"max_completion_tokens", 9}}), true).max_tokens,
      9);
  EXPECT_EQ(parse_request(chat_with({{"max_tokens", 5}}), true).max_tokens, 5);
  EXPECT_FALSE(parse_request(chat_with({}), true).max_tokens.has_value());
}

TEST(OpenAiRequest, MalformedBodiesAre400) {
  EXPECT_EQ(error_of("{\"model\": ").status, 400);
  EXPECT_NE(error_of("{\"model\": ").message.find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").message.find("must be a JSON object"), std::string::npos);
  const ApiError deep = error_of(std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_NE(deep.message.find("nested deeper"), std::string::npos);
}

TEST(OpenAiRequest, InvalidUtf8NamesTheField) {
  const ApiError e =
      error_of("{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"a\xff\"}]}");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "content");
  EXPECT_NE(e.message.find("not valid UTF-8 at byte"), std::string::npos) << e.message;
  EXPECT_EQ(invalid_utf8_at("h\xc3\xa9llo"), std::nullopt);
  EXPECT_EQ(invalid_utf8_at("ab\xed\xa0\x80"), 2u);  // a surrogate
  EXPECT_EQ(invalid_utf8_at("\xc0\x80"), 0u);        // overlong
}

TEST(OpenAiRequest, WrongTypesNameTheField) {
  struct Case {
    json extra;
    std::string param;
  };
  for (const auto& c : std::vector<Case>{{{{"temperature", "hot"}}, "temperature"},
                                         {{{"max_tokens", 1.5}}, "max_tokens"},
                                         {{{"n", "2"}}, "n"},
                                         {{{"stream", 1}}, "stream"},
                                         {{{"stop", 5}}, "stop"},
                                         {{{"seed", "x"}}, "seed"},
                                         {{{"logprobs", "yes"}}, "logprobs"},
                                         {{{"response_format", "json"}}, "response_format"},
                                         {{{"tools", {{"type", "function"}}}}, "tools"},
                                         {{{"user", 7}}, "user"},
                                         {{{"messages", "hi"}}, "messages"}}) {
    const ApiError e = error_of(chat_with(c.extra));
    EXPECT_EQ(e.status, 400) << c.extra.dump();
    EXPECT_EQ(e.param, c.param) << c.extra.dump() << ": " << e.message;
    EXPECT_EQ(e.type(), "invalid_request_error");
  }
  const ApiError role =
      error_of(json{{"model", "m"}, {"messages", {{{"role", "robot"}, {"content", "x"}}}}}.dump());
  EXPECT_EQ(role.param, "messages[0].role");
  EXPECT_EQ(error_of(json{{"model", "m"}, {"messages", {{{"role", "user"}}}}}.dump()).param,
            "messages[0].content");
  EXPECT_EQ(error_of(json{{"messages", json::array()}}.dump()).param, "model");
  EXPECT_EQ(error_of(json{{"model", "m"}, {"messages", json::array()}}.dump()).param, "messages");
}

TEST(OpenAiRequest, OutOfRangeValuesAre400) {
  for (const auto& [extra, param] : std::vector<std::pair<json, std::string>>{
           {{{"temperature", 2.5}}, "temperature"},
           {{{"top_p", 0}}, "top_p"},
           {{{"n", 1000}}, "n"},
           {{{"n", 0}}, "n"},
           {{{"max_tokens", 0}}, "max_tokens"},
           {{{"presence_penalty", 3}}, "presence_penalty"},
           {{{"top_logprobs", 21}, {"logprobs", true}}, "top_logprobs"},
           {{{"top_logprobs", 2}}, "top_logprobs"},
           {{{"stream_options", json::object()}}, "stream_options"}}) {
    const ApiError e = error_of(chat_with(extra));
    EXPECT_EQ(e.status, 400) << extra.dump();
    EXPECT_EQ(e.param, param) << extra.dump() << ": " << e.message;
  }
}

TEST(OpenAiRequest, StopStringsAreBounded) {
  json many = json::array();
  for (int i = 0; i < 10000; ++i) many.push_back("s" + std::to_string(i));
  const ApiError e = error_of(chat_with({{"stop", many}}));
  EXPECT_EQ(e.param, "stop");
  EXPECT_NE(e.message.find("10000"), std::string::npos) << e.message;
  EXPECT_EQ(error_of(chat_with({{"stop", {""}}})).param, "stop");
  EXPECT_EQ(error_of(chat_with({{"stop", {std::string(300, 'x')}}})).param, "stop");
  EXPECT_EQ(parse_request(chat_with({{"stop", {"a", "b", "c", "d"}}}), true).stop.size(), 4u);
}

TEST(OpenAiRequest, ResponseFormatAndTools) {
  Request r = parse_request(
      chat_with({{"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", "p"}, {"schema", {{"type", "object"}}}}}}}}),
      true);
  EXPECT_EQ(r.response_format, "json_schema");
  EXPECT_EQ(r.json_schema.dump(), R"({"type":"object"})");
  // The schema's properties stay in the order the request gave them, not sorted.
  r = parse_request(
      R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}], "response_format":
          {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object",
          "properties": {"z": {"type": "integer"}, "a": {"type": "string"}}}}}})",
      true);
  EXPECT_EQ(r.json_schema["properties"].dump(),
            R"({"z":{"type":"integer"},"a":{"type":"string"}})");
  EXPECT_EQ(error_of(chat_with({{"response_format", {{"type", "yaml"}}}})).param,
            "response_format.type");
  const json tools = {
      {{"type", "function"},
       {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}};
  r = parse_request(
      chat_with({{"tools", tools},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}),
      true);
  EXPECT_EQ(r.tool_choice, "function");
  EXPECT_EQ(r.tool_name, "get_weather");
  EXPECT_EQ(parse_request(chat_with({{"tools", tools}}), true).tool_choice, "auto");
  EXPECT_EQ(error_of(chat_with({{"tools", tools},
                                {"tool_choice",
                                 {{"type", "function"}, {"function", {{"name", "nope"}}}}}}))
                .param,
            "tool_choice");
  EXPECT_EQ(error_of(chat_with({{"tool_choice", "required"}})).param, "tool_choice");
  // A function's parameters keep the request's property order too.
  r = parse_request(
      R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}], "tools": [{"type":
          "function", "function": {"name": "f", "parameters": {"type": "object", "properties":
          {"z": {"type": "integer"}, "a": {"type": "string"}}}}}]})",
      true);
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0].parameters["properties"].dump(),
            R"({"z":{"type":"integer"},"a":{"type":"string"}})");
}

TEST(OpenAiRequest, SeveralCompletionPrompts) {
  Request texts = parse_request(R"({"model":"m","prompt":["a","b c"],"n":3})", false);
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(texts.prompts[1].text, "b c");
  EXPECT_FALSE(texts.prompts[1].is_ids);
  Request lists = parse_request(R"({"model":"m","prompt":[[1,2],[3]]})", false);
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].ids, std::vector<int64_t>{3});
  EXPECT_EQ(error_of(R"({"model":"m","prompt":["a",""]})", false).param, "prompt[1]");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":["a",[1]]})", false).param, "prompt[1]");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":[[1],"a"]})", false).param, "prompt[1]");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":[[1],[]]})", false).param, "prompt[1]");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":[[1],[-1]]})", false).param, "prompt[1]");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":[]})", false).param, "prompt");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":{}})", false).param, "prompt");
  // Prompts times n count against the cap on choices, as n alone does.
  EXPECT_EQ(parse_request(R"({"model":"m","prompt":["a","b"],"n":8})", false).n, 8);
  const ApiError many = error_of(R"({"model":"m","prompt":["a","b","c"],"n":6})", false);
  EXPECT_EQ(many.param, "n");
  EXPECT_NE(many.message.find("18 choices"), std::string::npos) << many.message;
  const json seventeen(std::vector<std::string>(17, "a"));
  EXPECT_EQ(error_of(json{{"model", "m"}, {"prompt", seventeen}}.dump(), false).param, "prompt");
}

TEST(OpenAiRequest, CompletionPrompts) {
  EXPECT_EQ(parse_request(R"({"model":"m","prompt":"once"})", false).prompts[0].text, "once");
  EXPECT_EQ(parse_request(R"({"model":"m","prompt":["once"]})", false).prompts[0].text, "once");
  Request ids = parse_request(R"({"model":"m","prompt":[1,5,9],"logprobs":2})", false);
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_ids);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int64_t>{1, 5, 9}));
  EXPECT_TRUE(ids.logprobs);
  EXPECT_EQ(ids.top_logprobs, 2);
  EXPECT_EQ(error_of(R"({"model":"m","prompt":""})", false).param, "prompt");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":[1,-2]})", false).param, "prompt");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":"a","logprobs":6})", false).param, "logprobs");
  EXPECT_EQ(error_of(R"({"model":"m","prompt":"a","suffix":"b"})", false).param, "suffix");
  EXPECT_NE(error_of(R"({"model":"m","prompt":"a","suffix":"b"})", false)
                .message.find("fill-in-the-middle"),
            std::string::npos);
  EXPECT_TRUE(parse_request(R"({"model":"m","prompt":"a","echo":true})", false).echo);
  EXPECT_EQ(error_of(R"({"model":"m"})", false).param, "prompt");
}

std::shared_ptr<text::Tokenizer> fortunes_tokenizer() {
  static auto tok = text::Tokenizer::from_dir(ZENITH_SOURCE_DIR "/examples/llm/fortunes-llama");
  return tok;
}

TEST(OpenAiPrompt, ChatUsesTheTemplateAndCompletionsTheText) {
  auto tok = fortunes_tokenizer();
  auto tmpl = text::ChatTemplate::for_tokenizer(*tok);
  Request chat = parse_request(chat_with({}), true);
  auto ids = prompt_ids(chat, *tok, &tmpl, 2048).at(0);
  const std::vector<text::ChatMessage> messages = {{"user", "hi"}};
  const auto want = text::encode_chat(*tok, tmpl, messages, true).ids;
  EXPECT_EQ(ids, std::vector<int64_t>(want.begin(), want.end()));
  Request completion = parse_request(R"({"model":"m","prompt":"Once upon"})", false);
  const auto text_ids = tok->encode("Once upon");
  EXPECT_EQ(prompt_ids(completion, *tok, nullptr, 2048).at(0),
            std::vector<int64_t>(text_ids.begin(), text_ids.end()));
}

TEST(OpenAiPrompt, ToolTurnsBecomeTextTheTemplateAccepts) {
  auto tok = fortunes_tokenizer();
  auto tmpl = text::ChatTemplate::for_tokenizer(*tok);
  Request r =
      parse_request(json{{"model", "m"},
                         {"messages",
                          {{{"role", "user"}, {"content", "weather?"}},
                           {{"role", "assistant"},
                            {"tool_calls",
                             {{{"id", "c1"},
                               {"type", "function"},
                               {"function", {{"name", "w"}, {"arguments", "{}"}}}}}}},
                           {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}}}}}
                        .dump(),
                    true);
  const auto ids = prompt_ids(r, *tok, &tmpl, 2048).at(0);
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  EXPECT_NE(tok->decode(ids32).find("Result of tool call c1: sunny"), std::string::npos);
}

TEST(OpenAiPrompt, OnlySpecialTokensAndBadIdsAre400) {
  auto tok = fortunes_tokenizer();
  auto tmpl = text::ChatTemplate::for_tokenizer(*tok);
  auto throws = [&](const std::string& body, bool chat) -> ApiError {
    try {
      prompt_ids(parse_request(body, chat), *tok, chat ? &tmpl : nullptr, 2048);
    } catch (const ApiError& e) {
      return e;
    }
    ADD_FAILURE() << body;
    return {};
  };
  EXPECT_EQ(throws(R"({"model":"m","prompt":"<s></s><s>"})", false).param, "prompt");
  EXPECT_EQ(
      throws(chat_with({{"messages", {{{"role", "user"}, {"content", "</s>"}}}}}), true).param,
      "messages[0].content");
  const ApiError id = throws(R"({"model":"m","prompt":[1,2048]})", false);
  EXPECT_NE(id.message.find("outside the vocabulary of 2048"), std::string::npos) << id.message;
}

TEST(OpenAiPrompt, BudgetNamesBothNumbers) {
  Request r = parse_request(chat_with({{"max_tokens", 1000000000}}), true);
  try {
    completion_budget(r, 20, 256);
    FAIL() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "max_tokens");
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_NE(e.message.find("256"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("1000000020"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("20 in the prompt"), std::string::npos) << e.message;
  }
  EXPECT_EQ(completion_budget(parse_request(chat_with({}), true), 20, 256), 236);
  EXPECT_EQ(completion_budget(parse_request(chat_with({{"max_tokens", 5}}), true), 20, 256), 5);
  EXPECT_THROW(completion_budget(parse_request(chat_with({}), true), 256, 256), ApiError);
}

}  // namespace
}  // namespace zenith::serve::llm
