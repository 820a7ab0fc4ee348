// The OpenAI service's routes over real HTTPS with examples/llm/fortunes-llama: tool_choice "auto"
// (a call the output makes, or text), completions with several prompts and echo, /v1/models'
// fields. A tool call is forced out of the tiny model by response_format: its schema admits only
// {"name": "get_weather", "arguments": {...}}, which "auto" then reads back as a call.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "serve/llm/openai_response.h"
#include "serve/llm_package.h"
#include "serve/openai_server_fixture.h"
#include "zenith/autograd.h"
#include "zenith/context.h"
#include "zenith/llama.h"
#include "zenith/ops.h"
#include "zenith/text.h"

namespace zenith::serve::llm {
namespace {

using namespace openai_test;

class OpenAiRoutesTest : public OpenAiServerTest {};

const json kWeatherTool = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"description", "the weather in a city"},
      {"parameters",
       {{"type", "object"},
        {"properties", {{"city", {{"type", "string"}, {"enum", {"Paris", "Oslo"}}}}}},
        {"required", {"city"}}}}}}};

// A response_format whose every output is the JSON object `arguments` describes, under "name".
json forced_call(const std::string& name, const json& arguments) {
  return {{"type", "json_schema"},
          {"json_schema",
           {{"name", "call"},
            {"schema",
             {{"type", "object"},
              {"properties", {{"name", {{"const", name}}}, {"arguments", arguments}}},
              {"required", {"name", "arguments"}}}}}}};
}

const json kParisArguments = {
    {"type", "object"}, {"properties", {{"city", {{"const", "Paris"}}}}}, {"required", {"city"}}};

TEST_F(OpenAiRoutesTest, AutoToolChoiceAnswersTheCallTheOutputMakes) {
  start();
  const json body = chat("What is the weather in Paris?",
                         {{"tools", {kWeatherTool}},
                          {"max_tokens", 80},
                          {"response_format", forced_call("get_weather", kParisArguments)}});
  auto r = post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = json::parse(r->body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << r->body;
  EXPECT_TRUE(choice["message"]["content"].is_null()) << r->body;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r->body;
  const json call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "{\"city\":\"Paris\"}");

  // Streamed: the role, then nothing of the JSON as content, one tool_calls delta, the finish.
  json streamed = body;
  streamed["stream"] = true;
  auto s = post("/v1/chat/completions", streamed);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200) << s->body;
  const Sse sse = parse_sse(s->body);
  ASSERT_TRUE(sse.well_framed) << s->body;
  ASSERT_EQ(sse.data.back(), "[DONE]");
  std::string content, finish;
  json calls = json::array();
  for (size_t i = 0; i + 1 < sse.data.size(); ++i) {
    const json delta = json::parse(sse.data[i])["choices"][0]["delta"];
    content += delta.value("content", "");
    if (delta.contains("tool_calls"))
      for (const auto& c : delta["tool_calls"]) calls.push_back(c);
    const json f = json::parse(sse.data[i])["choices"][0]["finish_reason"];
    if (!f.is_null()) finish = f;
  }
  EXPECT_EQ(content, "");
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 1u) << s->body;
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], "{\"city\":\"Paris\"}");

  // tool_choice "none": the same output is text.
  json none = body;
  none["tool_choice"] = "none";
  auto n = post("/v1/chat/completions", none);
  ASSERT_TRUE(n);
  const json text_choice = json::parse(n->body)["choices"][0];
  EXPECT_EQ(text_choice["finish_reason"], "stop");
  EXPECT_NE(text_choice["message"]["content"].get<std::string>().find("get_weather"),
            std::string::npos);
}

TEST_F(OpenAiRoutesTest, AutoToolChoiceAnswersOtherOutputsAsContent) {
  start();
  // Free text (the tiny model writes no JSON), streamed and not: the same content.
  const json body = chat("Tell me a fortune", {{"tools", {kWeatherTool}}, {"max_tokens", 6}});
  auto r = post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = json::parse(r->body)["choices"][0];
  EXPECT_NE(choice["finish_reason"], "tool_calls");
  const std::string text = choice["message"]["content"];
  EXPECT_FALSE(text.empty());
  json streamed = body;
  streamed["stream"] = true;
  auto s = post("/v1/chat/completions", streamed);
  ASSERT_TRUE(s);
  const Sse sse = parse_sse(s->body);
  std::string content;
  for (size_t i = 0; i + 1 < sse.data.size(); ++i)
    content += json::parse(sse.data[i])["choices"][0]["delta"].value("content", "");
  EXPECT_EQ(content, text);

  // JSON that is not a call of the tools (its arguments fail the schema): content, whole.
  const json bad_args = {
      {"type", "object"}, {"properties", {{"city", {{"const", "Rome"}}}}}, {"required", {"city"}}};
  json wrong = chat("Weather?", {{"tools", {kWeatherTool}},
                                 {"max_tokens", 80},
                                 {"stream", true},
                                 {"response_format", forced_call("get_weather", bad_args)}});
  auto w = post("/v1/chat/completions", wrong);
  ASSERT_TRUE(w);
  const Sse wsse = parse_sse(w->body);
  std::vector<std::string> pieces;
  std::string finish;
  for (size_t i = 0; i + 1 < wsse.data.size(); ++i) {
    const json c = json::parse(wsse.data[i])["choices"][0];
    const std::string piece = c["delta"].value("content", "");
    if (!piece.empty()) pieces.push_back(piece);
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  ASSERT_EQ(pieces.size(), 1u) << w->body;  // held back, then sent at once
  EXPECT_EQ(json::parse(pieces[0]),
            json({{"name", "get_weather"}, {"arguments", {{"city", "Rome"}}}}));
  EXPECT_EQ(finish, "stop");
}

TEST_F(OpenAiRoutesTest, CompletionsAnswerEachPromptNTimesInOpenAisOrder) {
  start();
  auto text_of = [&](const json& prompt) {
    auto r =
        post("/v1/completions",
             {{"model", "fortunes"}, {"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}});
    EXPECT_TRUE(r && r->status == 200);
    return json::parse(r->body)["choices"][0]["text"].get<std::string>();
  };
  const std::string once = text_of("Once upon a time"), the = text_of("The cat");
  auto r = post("/v1/completions", {{"model", "fortunes"},
                                    {"prompt", {"Once upon a time", "The cat"}},
                                    {"n", 2},
                                    {"max_tokens", 4},
                                    {"temperature", 0}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json answer = json::parse(r->body);
  ASSERT_EQ(answer["choices"].size(), 4u);
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(answer["choices"][c]["index"], c);
    EXPECT_EQ(answer["choices"][c]["text"], c < 2 ? once : the) << c;
  }
  EXPECT_EQ(answer["usage"]["completion_tokens"], 16);
  auto tok = text::Tokenizer::from_dir(kModel);
  const int64_t prompt_tokens =
      int64_t(tok->encode("Once upon a time").size() + tok->encode("The cat").size());
  EXPECT_EQ(answer["usage"]["prompt_tokens"], prompt_tokens);

  // Token-id lists, streamed: every chunk names its choice; each choice reassembles.
  const auto a = tok->encode("Once upon a time"), b = tok->encode("The cat");
  auto s = post("/v1/completions", {{"model", "fortunes"},
                                    {"prompt", {a, b}},
                                    {"max_tokens", 4},
                                    {"temperature", 0},
                                    {"stream", true}});
  ASSERT_TRUE(s);
  const Sse sse = parse_sse(s->body);
  std::vector<std::string> texts(2);
  for (size_t i = 0; i + 1 < sse.data.size(); ++i) {
    const json c = json::parse(sse.data[i])["choices"][0];
    texts.at(c["index"].get<size_t>()) += c["text"].get<std::string>();
  }
  EXPECT_EQ(texts[0], once);
  EXPECT_EQ(texts[1], the);
  // More choices than n allows: 400 naming the field.
  expect_error(
      post("/v1/completions", {{"model", "fortunes"}, {"prompt", {"a", "b", "c"}}, {"n", 6}}), 400,
      "n");
}

TEST_F(OpenAiRoutesTest, EchoPrependsThePromptAndItsLogprobs) {
  start();
  auto tok = text::Tokenizer::from_dir(kModel);
  const auto ids32 = tok->encode("Once upon a time");
  const std::vector<int64_t> ids(ids32.begin(), ids32.end());
  const json body = {
      {"model", "fortunes"}, {"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0}};
  auto plain = post("/v1/completions", body);
  ASSERT_TRUE(plain);
  const std::string completion = json::parse(plain->body)["choices"][0]["text"];
  json echo = body;
  echo["echo"] = true;
  echo["logprobs"] = 2;
  auto r = post("/v1/completions", echo);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = json::parse(r->body)["choices"][0];
  EXPECT_EQ(choice["text"], "Once upon a time" + completion);
  const json lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size() + 3) << lp.dump();
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["text_offset"][0], 0);
  // Each prompt token's logprob is the model's log-softmax after the tokens before it.
  auto model = models::Llama::from_pretrained(kModel);
  model->eval();
  NoGradGuard no_grad;
  Tensor logits = model->forward(Tensor::from_vector(ids, {1, int64_t(ids.size())}))
                      .to(DType::f32)
                      .contiguous();
  const int64_t v = logits.size(2);
  int added = 0;  // positions whose prompt token is not among the top 2
  for (size_t k = 1; k < ids.size(); ++k) {
    const float* row = logits.data<float>() + int64_t(k - 1) * v;
    double m = -1e300, sum = 0;
    for (int64_t i = 0; i < v; ++i) m = std::max(m, double(row[i]));
    for (int64_t i = 0; i < v; ++i) sum += std::exp(double(row[i]) - m);
    const double offline = double(row[ids[k]]) - m - std::log(sum);
    EXPECT_NEAR(lp["token_logprobs"][k].get<double>(), offline, 1e-5) << k;
    EXPECT_EQ(lp["tokens"][k], token_text(*tok, ids[k]));
    // top_logprobs: the top 2, plus the prompt token itself when it is not one of them (as
    // OpenAI's legacy completions and vLLM do), with its own log-softmax.
    const json& top = lp["top_logprobs"][k];
    int64_t above = 0;  // tokens strictly more likely than the prompt token
    for (int64_t i = 0; i < v; ++i) above += row[i] > row[ids[k]];
    EXPECT_EQ(top.size(), above < 2 ? 2u : 3u) << k << " " << top.dump();
    added += above >= 2;
    const std::string own = token_text(*tok, ids[k]);
    ASSERT_TRUE(top.contains(own)) << k << " " << top.dump();
    EXPECT_NEAR(top[own].get<double>(), offline, 1e-5) << k;
  }
  EXPECT_GT(added, 0) << "the prompt should hold a token outside its position's top 2";
  // Streamed: the prompt comes in the first chunk.
  json streamed = body;
  streamed["echo"] = true;
  streamed["stream"] = true;
  auto s = post("/v1/completions", streamed);
  ASSERT_TRUE(s);
  const Sse sse = parse_sse(s->body);
  ASSERT_GE(sse.data.size(), 2u);
  const std::string first = json::parse(sse.data[0])["choices"][0]["text"];
  EXPECT_EQ(first.rfind("Once upon a time", 0), 0u) << first;
  std::string all;
  for (size_t i = 0; i + 1 < sse.data.size(); ++i)
    all += json::parse(sse.data[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(all, "Once upon a time" + completion);
  // Several prompts: each choice echoes its own, with its own logprobs.
  json both = echo;
  both["prompt"] = {"The cat", "Once upon a time"};
  auto b = post("/v1/completions", both);
  ASSERT_TRUE(b);
  ASSERT_EQ(b->status, 200) << b->body;
  const json bc = json::parse(b->body)["choices"];
  EXPECT_EQ(bc[1]["text"], "Once upon a time" + completion);
  EXPECT_EQ(bc[1]["logprobs"]["token_logprobs"], lp["token_logprobs"]);
  EXPECT_EQ(bc[0]["text"].get<std::string>().rfind("The cat", 0), 0u);
  EXPECT_EQ(bc[0]["logprobs"]["tokens"].size(), tok->encode("The cat").size() + 3);
  // suffix stays refused, naming the field.
  json suffix = body;
  suffix["suffix"] = " The end.";
  expect_error(post("/v1/completions", suffix), 400, "suffix");
}

// A chunk per generated token, as vLLM streams a chunk per step: also for a token whose text a
// stop string holds back (then its text is ""), so a client's inter-token gaps are the engine's.
TEST_F(OpenAiRoutesTest, StreamsAChunkPerTokenAlsoWhileAStopStringHoldsText) {
  start();
  const json body = {{"model", "fortunes"},
                     {"prompt", "Once upon a time"},
                     {"max_tokens", 16},
                     {"temperature", 0},
                     {"logprobs", 0}};
  auto free_run = post("/v1/completions", body);
  ASSERT_TRUE(free_run);
  ASSERT_EQ(free_run->status, 200) << free_run->body;
  const json choice = json::parse(free_run->body)["choices"][0];
  const std::string text = choice["text"];
  const json tokens = choice["logprobs"]["tokens"];
  const json offsets = choice["logprobs"]["text_offset"];
  ASSERT_EQ(tokens.size(), offsets.size());
  // A stop string from the start of token k's text into token k + 1's, found nowhere earlier.
  size_t k = 1, at = 0;
  std::string stop;
  for (; k + 2 < tokens.size(); ++k) {
    const std::string a = tokens[k], b = tokens[k + 1];
    at = offsets[k].get<size_t>() - offsets[0].get<size_t>();
    if (a.empty() || b.empty() || text.compare(at, a.size(), a) != 0) continue;
    stop = a + b.substr(0, 1);
    if (text.find(stop) == at) break;
  }
  ASSERT_LT(k + 2, tokens.size()) << free_run->body;
  for (const bool chat : {false, true}) {
    json streamed = body;
    streamed.erase("logprobs");
    streamed["stop"] = stop;
    streamed["stream"] = true;
    streamed["stream_options"] = {{"include_usage", true}};
    if (chat) {
      streamed.erase("prompt");
      streamed["messages"] = {{{"role", "user"}, {"content", "Once upon a time"}}};
    }
    auto s = post(chat ? "/v1/chat/completions" : "/v1/completions", streamed);
    ASSERT_TRUE(s);
    const Sse sse = parse_sse(s->body);
    ASSERT_TRUE(sse.well_framed);
    ASSERT_GE(sse.data.size(), 3u);
    int64_t chunks = 0, empty = 0;
    for (size_t i = 0; i + 1 < sse.data.size(); ++i) {
      const json c = json::parse(sse.data[i]);
      if (c["choices"].empty()) {  // the usage chunk
        EXPECT_EQ(c["usage"]["completion_tokens"], chunks) << s->body;
        continue;
      }
      const json& ch = c["choices"][0];
      if (chat && ch["delta"].contains("role")) continue;  // the first chunk: the role alone
      ++chunks;
      const std::string piece =
          chat ? ch["delta"].value("content", std::string()) : ch["text"].get<std::string>();
      empty += piece.empty() && ch["finish_reason"].is_null();
    }
    EXPECT_GT(chunks, 1) << s->body;
    if (!chat) {
      EXPECT_EQ(chunks, int64_t(k) + 2) << s->body;  // tokens 0..k+1, the last finishing
      EXPECT_GE(empty, 1) << s->body;                // token k's text held back
    }
  }
}

TEST_F(OpenAiRoutesTest, ModelsCarryMaxModelLenRootAndTheEngineOptions) {
  LlmServeOptions o = options();
  o.engine.max_batched_tokens = 48;
  o.engine.max_step_cost = 3;
  o.engine.kv_cache_dtype = DType::bf16;
  start(o);
  auto r = client(token_)->Get("/v1/models/fortunes");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json m = json::parse(r->body);
  EXPECT_EQ(m["root"], kModel);
  EXPECT_TRUE(m["parent"].is_null());
  EXPECT_EQ(m["max_model_len"], server_->engine().max_model_len());
  const json& z = m["zenith"];
  EXPECT_EQ(z["max_batched_tokens"], 48);
  EXPECT_EQ(z["max_step_cost"], 3.0);
  EXPECT_EQ(z["kv_cache_memory"], 16 << 20);
  EXPECT_EQ(z["kv_cache_dtype"], "bf16");
  EXPECT_GT(z["kv_cache_blocks"].get<int64_t>(), 0);
  EXPECT_EQ(z["threads"], context::get_num_threads());
  EXPECT_EQ(z["dtype"], "bf16");  // the file's (config.json: bfloat16)
  EXPECT_EQ(r->body.find(token_), std::string::npos);
  auto list = client(token_)->Get("/v1/models");
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body)["data"][0], m);
}

// A deployed version (an LLM package in the registry) names the model it was made from.
TEST_F(OpenAiRoutesTest, APackagesRootIsTheModelItWasMadeFrom) {
  const std::string pkg = dir_->str() + "/package";
  write_llm_package(kModel, {}, pkg, "fortunes");
  server_ = std::make_unique<LlmServer>(llm_package_model(pkg), options());
  port_ = server_->bind();
  thread_ = std::thread([this] { server_->serve(); });
  auto r = client(token_)->Get("/v1/models/fortunes");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["root"],
            std::filesystem::path(kModel).lexically_normal().string());
}

}  // namespace
}  // namespace zenith::serve::llm
