// The OpenAI-compatible LLM service over real HTTPS on loopback (src/serve/llm/http_server.cpp,
// openai_routes.cpp) with the small examples/llm/fortunes-llama: tokens, the error envelope and
// its headers, streaming as OpenAI frames it (raw bytes), pings, 429, metrics counts.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "platform/deployments/deployment_store.h"
#include "serve/llm/http_server.h"
#include "serve/llm/openai_response.h"
#include "serve/openai_server_fixture.h"
#include "support/raw_http.h"
#include "support/temp_dir.h"
#include "zenith/autograd.h"
#include "zenith/gguf.h"
#include "zenith/hf.h"
#include "zenith/llama.h"
#include "zenith/ops.h"
#include "zenith/text.h"

namespace zenith::serve::llm {
namespace {

using namespace openai_test;

using nlohmann::json;
using zenith::testing::TempDir;
namespace fs = std::filesystem;

TEST_F(OpenAiServerTest, HealthIsOpenAndEverythingElseNeedsTheServiceToken) {
  start();
  auto health = client("")->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_FALSE(health->get_header_value("x-request-id").empty());
  expect_error(client("")->Get("/v1/models"), 401, "");
  expect_error(client("")->Get("/metrics"), 401, "");
  expect_error(client(other_token_)->Get("/metrics"), 403, "");
  expect_error(client(other_token_)->Get("/v1/models"), 403, "");
  expect_error(client("zt_nonsense")->Get("/v1/models"), 401, "");
  expect_error(post("/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", "/x"}}), 403, "");
  auto models = client(token_)->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  const json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], "fortunes");
  EXPECT_TRUE(list["data"][0]["parent"].is_null());
}

TEST_F(OpenAiServerTest, ChatAnswersWithUsageAndMatchesCompletionsOfTheSamePrompt) {
  start();
  auto r = post("/v1/chat/completions", chat("Tell me a fortune"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json a = json::parse(r->body);
  EXPECT_EQ(a["object"], "chat.completion");
  EXPECT_EQ(a["id"], "chatcmpl-" + r->get_header_value("x-request-id"));
  EXPECT_EQ(a["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(a["usage"]["completion_tokens"], 8);
  EXPECT_EQ(a["usage"]["total_tokens"],
            a["usage"]["prompt_tokens"].get<int>() + a["usage"]["completion_tokens"].get<int>());
  EXPECT_TRUE(a["usage"]["prompt_tokens_details"]["cached_tokens"].is_number());
  // The same prompt as ids through /v1/completions gives the same greedy text.
  auto tok = text::Tokenizer::from_dir(kModel);
  auto tmpl = text::ChatTemplate::for_tokenizer(*tok);
  const std::vector<text::ChatMessage> messages = {{"user", "Tell me a fortune"}};
  const auto ids = text::encode_chat(*tok, tmpl, messages, true).ids;
  auto c = post("/v1/completions",
                {{"model", "fortunes"}, {"prompt", ids}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_TRUE(c);
  ASSERT_EQ(c->status, 200) << c->body;
  const json b = json::parse(c->body);
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["message"]["content"]);
  EXPECT_EQ(b["usage"]["prompt_tokens"], a["usage"]["prompt_tokens"]);
}

TEST_F(OpenAiServerTest, LogprobsEqualAnOfflineLogSoftmax) {
  start();
  auto tok = text::Tokenizer::from_dir(kModel);
  const auto ids32 = tok->encode("Once upon a time");
  const std::vector<int64_t> ids(ids32.begin(), ids32.end());
  auto r = post("/v1/completions", {{"model", "fortunes"},
                                    {"prompt", ids},
                                    {"max_tokens", 1},
                                    {"temperature", 0},
                                    {"logprobs", 5}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json lp = json::parse(r->body)["choices"][0]["logprobs"];
  // The model's own forward over the prompt: log-softmax of the last position, in double.
  auto model = models::Llama::from_pretrained(kModel);
  model->eval();
  NoGradGuard no_grad;
  Tensor logits = model->forward(Tensor::from_vector(ids, {1, int64_t(ids.size())}))
                      .to(DType::f32)
                      .contiguous();
  const int64_t v = logits.size(2);
  const float* row = logits.data<float>() + (logits.size(1) - 1) * v;
  double m = -1e300, sum = 0;
  for (int64_t i = 0; i < v; ++i) m = std::max(m, double(row[i]));
  for (int64_t i = 0; i < v; ++i) sum += std::exp(double(row[i]) - m);
  auto offline = [&](int64_t id) { return double(row[id]) - m - std::log(sum); };
  const int64_t best = std::max_element(row, row + v) - row;
  EXPECT_EQ(lp["tokens"][0], token_text(*tok, best));
  EXPECT_NEAR(lp["token_logprobs"][0].get<double>(), offline(best), 1e-5);
  ASSERT_EQ(lp["top_logprobs"][0].size(), 5u);
  for (const auto& [text, value] : lp["top_logprobs"][0].items()) {
    const auto id = tok->encode(text, false);  // a top token's own text, re-encoded
    if (id.size() == 1) EXPECT_NEAR(value.get<double>(), offline(id[0]), 1e-5) << text;
  }
}

TEST_F(OpenAiServerTest, ClientMistakesAre4xxNamingTheFieldAndTheServiceLivesOn) {
  start();
  expect_error(client(token_)->Post("/v1/chat/completions", "{\"model\": ", "application/json"),
               400, "");
  expect_error(
      client(token_)->Post("/v1/chat/completions",
                           std::string(10000, '[') + std::string(10000, ']'), "application/json"),
      400, "");
  expect_error(post("/v1/chat/completions", chat("hi", {{"model", "gpt-4"}})), 404, "model");
  expect_error(post("/v1/chat/completions", chat("hi", {{"max_tokens", 1000000000}})), 400,
               "max_tokens");
  expect_error(post("/v1/chat/completions", chat("hi", {{"n", 1000}})), 400, "n");
  expect_error(post("/v1/chat/completions", chat("hi", {{"temperature", "warm"}})), 400,
               "temperature");
  json stops = json::array();
  for (int i = 0; i < 10000; ++i) stops.push_back("x" + std::to_string(i));
  expect_error(post("/v1/chat/completions", chat("hi", {{"stop", stops}})), 400, "stop");
  expect_error(post("/v1/completions", {{"model", "fortunes"}, {"prompt", "<s></s>"}}), 400,
               "prompt");
  expect_error(
      client(token_)->Post("/v1/completions", "{\"model\":\"fortunes\",\"prompt\":\"a\xff\"}",
                           "application/json"),
      400, "prompt");
  expect_error(
      post(
          "/v1/chat/completions",
          chat("hi", {{"response_format",
                       {{"type", "json_schema"},
                        {"json_schema",
                         {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "a+"}}}}}}}})),
      400, "response_format.json_schema.schema");
  const std::string big(9 << 20, 'a');
  expect_error(client(token_)->Post("/v1/completions", big, "application/json"), 413, "");
  auto health = client("")->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(OpenAiServerTest, StreamIsFramedAsOpenAiFramesIt) {
  start();
  auto r = post(
      "/v1/chat/completions",
      chat("Tell me a fortune",
           {{"stream", true}, {"max_tokens", 6}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const Sse sse = parse_sse(r->body);
  ASSERT_TRUE(sse.well_framed) << r->body;
  ASSERT_GE(sse.data.size(), 3u);
  EXPECT_EQ(sse.data.back(), "[DONE]");
  const json first = json::parse(sse.data[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text, finish;
  for (size_t i = 0; i + 2 < sse.data.size(); ++i) {
    const json chunk = json::parse(sse.data[i]);
    EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null()) << sse.data[i];
    EXPECT_EQ(chunk["id"], first["id"]);
    text += chunk["choices"][0]["delta"].value("content", "");
    if (!chunk["choices"][0]["finish_reason"].is_null())
      finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(finish, "length");
  const json usage = json::parse(sse.data[sse.data.size() - 2]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  // The same request without streaming says the same.
  auto whole = post("/v1/chat/completions", chat("Tell me a fortune", {{"max_tokens", 6}}));
  ASSERT_TRUE(whole);
  EXPECT_EQ(json::parse(whole->body)["choices"][0]["message"]["content"], text);
}

TEST_F(OpenAiServerTest, WaitingStreamsGetPingsAndAFullQueueIs429) {
  LlmServeOptions o = options();
  o.ping_interval_s = 0.005;
  o.engine.max_running = 1;
  o.engine.max_waiting = 1;
  start(o);
  EngineHold hold(server_->engine());
  std::optional<httplib::Result> waiter;
  std::thread waiter_thread([&] {
    waiter.emplace(
        post("/v1/completions",
             {{"model", "fortunes"}, {"prompt", "You"}, {"max_tokens", 4}, {"stream", true}}));
  });
  // (The engine's stats are frozen with its thread: give the stream time to be queued.)
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto full = post("/v1/completions", {{"model", "fortunes"}, {"prompt", "Hi"}, {"max_tokens", 2}});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // pings while it waits
  hold.release();
  waiter_thread.join();
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429) << full->body;
  EXPECT_EQ(full->get_header_value("retry-after"), "1");
  EXPECT_EQ(json::parse(full->body)["error"]["type"], "rate_limit_error");
  ASSERT_TRUE(waiter && *waiter);
  const Sse sse = parse_sse((*waiter)->body);
  EXPECT_TRUE(sse.well_framed);
  EXPECT_GT(sse.comments, 0) << (*waiter)->body;
  EXPECT_EQ(sse.data.back(), "[DONE]");
}

double metric(const std::string& text, const std::string& line_start);

TEST_F(OpenAiServerTest, AClientThatGoesAwayIsCancelled) {
  LlmServeOptions o = options();
  o.ping_interval_s = 0.005;
  o.engine.max_running = 1;
  start(o);
  EngineHold hold(server_->engine());
  {
    // A stream waits behind the held request; its client reads the first bytes and leaves.
    zenith::testing::RawConnection c(port_, server_->cert_path());
    ASSERT_TRUE(c.connected());
    const std::string body = json{
        {"model", "fortunes"},
        {"prompt", "You"},
        {"max_tokens", 100},
        {"stream", true}}.dump();
    c.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token_ +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body);
    ASSERT_TRUE(c.reply_waiting(5000));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  hold.release();
  const std::string labels = "{model_name=\"fortunes\"}";
  std::string t;
  for (int i = 0; i < 100; ++i) {
    t = client(token_)->Get("/metrics")->body;
    if (metric(t,
               "zenith:request_success_total{model_name=\"fortunes\",finished_reason=\"abort\"}") ==
        1)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(
      metric(t, "zenith:request_success_total{model_name=\"fortunes\",finished_reason=\"abort\"}"),
      1)
      << t;
  EXPECT_EQ(metric(t, "zenith:num_requests_running" + labels), 0.0) << t;
  EXPECT_EQ(metric(t, "zenith:num_requests_waiting" + labels), 0.0) << t;
}

double metric(const std::string& text, const std::string& line_start) {
  const size_t at = text.find("\n" + line_start);
  if (at == std::string::npos) return -1;
  const size_t end = text.find('\n', at + 1);
  const std::string line = text.substr(at + 1, end - at - 1);
  return std::stod(line.substr(line.rfind(' ') + 1));
}

TEST_F(OpenAiServerTest, MetricsCountWhatWasSent) {
  start();
  int64_t prompt = 0, generated = 0;
  const std::vector<std::string> prompts = {"Once upon", "You will", "The sea"};
  for (const auto& p : prompts) {
    auto r = post("/v1/completions",
                  {{"model", "fortunes"}, {"prompt", p}, {"max_tokens", 5}, {"temperature", 0}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json u = json::parse(r->body)["usage"];
    prompt += u["prompt_tokens"].get<int64_t>() -
              u["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    generated += u["completion_tokens"].get<int64_t>();
  }
  auto m = client(token_)->Get("/metrics");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  const std::string& t = m->body;
  const std::string labels = "{model_name=\"fortunes\"}";
  EXPECT_EQ(metric(t, "zenith:generation_tokens_total" + labels), double(generated)) << t;
  EXPECT_EQ(metric(t, "zenith:prompt_tokens_total" + labels), double(prompt)) << t;
  const double finished =
      metric(t, "zenith:request_success_total{model_name=\"fortunes\",finished_reason=\"stop\"}") +
      metric(t, "zenith:request_success_total{model_name=\"fortunes\",finished_reason=\"length\"}");
  EXPECT_EQ(finished, 3.0) << t;
  EXPECT_EQ(metric(t, "zenith:e2e_request_latency_seconds_count" + labels), 3.0) << t;
  EXPECT_EQ(metric(t, "zenith:time_to_first_token_seconds_count" + labels), 3.0) << t;
  EXPECT_EQ(metric(t, "zenith:num_requests_running" + labels), 0.0);
  EXPECT_EQ(metric(t, "zenith:num_requests_waiting" + labels), 0.0);
  for (const char* name :
       {"zenith:kv_cache_usage_perc", "zenith:num_preemptions_total",
        "zenith:prefix_cache_queries_total", "zenith:prefix_cache_hits_total",
        "zenith:inter_token_latency_seconds_count", "zenith:request_queue_time_seconds_count"})
    EXPECT_GE(metric(t, std::string(name) + labels), 0.0) << name;
  EXPECT_EQ(metric(t,
                   "zenith_serve_requests_total{model=\"fortunes\",endpoint=\"completions\","
                   "status=\"200\"}"),
            3.0);
}

}  // namespace
}  // namespace zenith::serve::llm

namespace zenith::serve::llm {
namespace {

using namespace openai_test;

// /metrics answers the service's tokens and the platform's own (its monitor scrapes it with
// DATA/token), nobody else.
TEST_F(OpenAiServerTest, MetricsNeedTheServiceTokenOrThePlatforms) {
  LlmServeOptions o = options();
  o.admin_token = "zt_the_platforms_own_token";
  start(o);
  expect_error(client("")->Get("/metrics"), 401, "");
  expect_error(client("zt_nonsense")->Get("/metrics"), 401, "");
  expect_error(client(other_token_)->Get("/metrics"), 403, "");
  for (const std::string& token : {token_, o.admin_token}) {
    auto m = client(token)->Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200) << m->body;
    EXPECT_NE(m->body.find("zenith:num_requests_running"), std::string::npos);
  }
  // The platform's token opens /metrics only, not the completions.
  expect_error(client(o.admin_token)->Get("/v1/models"), 401, "");
}

// A non-streaming request writes nothing until it is done, so only its socket says that its
// client left: the route polls it and cancels. The client leaves while its request runs (the
// engine held mid-run meanwhile); it ends as "abort" with fewer tokens than its solo run made,
// and no more tokens come.
TEST_F(OpenAiServerTest, ANonStreamingClientThatGoesAwayIsCancelled) {
  start();
  Engine& engine = server_->engine();
  const json request = {{"model", "fortunes"},
                        {"prompt", "You"},
                        {"max_tokens", 240},
                        {"temperature", 1},
                        {"seed", 11}};
  auto solo = post("/v1/completions", request);
  ASSERT_TRUE(solo);
  ASSERT_EQ(solo->status, 200) << solo->body;
  const uint64_t solo_tokens = json::parse(solo->body)["usage"]["completion_tokens"];
  ASSERT_GE(solo_tokens, 100u) << "the test needs a long request: " << solo->body;
  const uint64_t before = engine.stats().generation_tokens;
  {
    auto c = std::make_unique<zenith::testing::RawConnection>(port_, server_->cert_path());
    ASSERT_TRUE(c->connected());
    const std::string body = request.dump();
    c->send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token_ +
            "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\n\r\n" + body);
    for (int i = 0; i < 4000 && engine.stats().running == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(engine.stats().running, 1);
    EngineHold hold(engine);  // the engine stops in the middle of the request
    c.reset();                // the client leaves; its route notices within its 10 ms poll
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }  // the engine goes on
  auto aborted = [&] {
    auto f = engine.stats().finished;
    return f.count("abort") ? f["abort"] : 0;
  };
  for (int i = 0; i < 400 && aborted() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::string t = client(token_)->Get("/metrics")->body;
  EXPECT_EQ(
      metric(t, "zenith:request_success_total{model_name=\"fortunes\",finished_reason=\"abort\"}"),
      1.0)
      << t;
  EXPECT_EQ(metric(t, "zenith:num_requests_running{model_name=\"fortunes\"}"), 0.0) << t;
  // Its tokens and the held request's (at most 4): fewer than the solo run's.
  const uint64_t after = engine.stats().generation_tokens;
  EXPECT_LT(after - before, solo_tokens + 4 - 1) << t;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(engine.stats().generation_tokens, after) << "tokens still generated";
}

// `zenith serve X.gguf`: a llama.cpp file (weights and vocabulary) answers as the Hugging Face
// directory it was exported from, token for token.
TEST_F(OpenAiServerTest, AGgufFileServesAsItsModelDirectory) {
  const std::string gguf = dir_->str() + "/fortunes.gguf";
  {
    auto model = models::Llama::from_pretrained(kModel);
    auto tokenizer = text::Tokenizer::find_in_dir(kModel);
    models::save_gguf(*model, tokenizer.get(), gguf);
  }
  const json body = {
      {"model", "fortunes"}, {"prompt", "Once upon"}, {"max_tokens", 12}, {"temperature", 0}};
  start();
  auto expected = post("/v1/completions", body);
  ASSERT_TRUE(expected);
  ASSERT_EQ(expected->status, 200) << expected->body;
  TearDown();
  server_ = std::make_unique<LlmServer>(gguf, options());
  port_ = server_->bind();
  thread_ = std::thread([this] { server_->serve(); });
  EXPECT_EQ(server_->options().name, "fortunes");
  auto r = post("/v1/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"],
            json::parse(expected->body)["choices"][0]["text"]);
  EXPECT_EQ(json::parse(r->body)["usage"], json::parse(expected->body)["usage"]);
}

// `zenith serve --dtype q4_0`: the weights are quantized at load (as generate --dtype), so the
// same greedy completion comes with other log-probabilities; a dtype zenith lacks is refused.
TEST_F(OpenAiServerTest, DtypeQuantizesTheWeightsAtLoad) {
  const json body = {{"model", "fortunes"},
                     {"prompt", "Once upon"},
                     {"max_tokens", 4},
                     {"temperature", 0},
                     {"logprobs", 1}};
  auto first_logprob = [&](const std::string& dtype) {
    TearDown();
    LlmServeOptions o = options();
    o.dtype = dtype;
    start(o);
    auto r = post("/v1/completions", body);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
    return json::parse(r->body)["choices"][0]["logprobs"]["token_logprobs"][0].get<double>();
  };
  const double f32 = first_logprob(""), q4_0 = first_logprob("q4_0"), q8_0 = first_logprob("q8_0");
  EXPECT_NE(q4_0, f32);
  EXPECT_NE(q8_0, f32);
  EXPECT_NE(q8_0, q4_0);
  TearDown();
  LlmServeOptions bad = options();
  bad.dtype = "q5_0";
  try {
    LlmServer server(kModel, bad);
    ADD_FAILURE() << "--dtype q5_0 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype: expected f32, bf16, f16, q8_0, q4_0 or q4_k"),
              std::string::npos)
        << e.what();
  }
}

// An adapter loaded at run time is kept in LlmServeOptions::adapters_file (a platform service's
// DATA/services/NAME/adapters.json) and loaded again when the service starts again (a restart,
// a rollback, a new version); one unloaded is forgotten.
TEST_F(OpenAiServerTest, AdaptersLoadedAtRunTimeSurviveARestart) {
  const std::string adapter = dir_->str() + "/kept-adapter";
  {
    auto base = models::Llama::from_pretrained(kModel);
    io::LoraAdapter a;
    a.config.r = 2;
    a.config.lora_alpha = 4;
    a.config.target_modules = {"q_proj", "v_proj"};
    for (const auto& [path, layer] : base->linear_layers()) {
      if (!a.config.targets(path)) continue;
      a.modules[path] = {ops::mul(Tensor::randn({2, layer->in_features()}), 0.1),
                         ops::mul(Tensor::randn({layer->out_features(), 2}), 0.1)};
    }
    io::save_lora_adapter(adapter, a);
  }
  LlmServeOptions o = options();
  o.adapters_file = dir_->str() + "/services/fortunes/adapters.json";
  auto ids = [&] {
    std::vector<std::string> out;
    const json list = json::parse(client(token_)->Get("/v1/models")->body);
    for (const auto& m : list["data"]) out.push_back(m["id"]);
    return out;
  };
  start(o);
  auto r =
      post("/v1/load_lora_adapter", {{"lora_name", "kept"}, {"lora_path", adapter}}, admin_token_);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  r = post("/v1/load_lora_adapter", {{"lora_name", "dropped"}, {"lora_path", adapter}},
           admin_token_);
  ASSERT_EQ(r->status, 200) << r->body;
  r = post("/v1/unload_lora_adapter", {{"lora_name", "dropped"}}, admin_token_);
  ASSERT_EQ(r->status, 200) << r->body;
  auto answer = post("/v1/completions",
                     {{"model", "kept"}, {"prompt", "You"}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(answer->status, 200) << answer->body;
  TearDown();

  start(o);
  EXPECT_EQ(ids(), (std::vector<std::string>{"fortunes", "kept"}));
  auto again = post("/v1/completions",
                    {{"model", "kept"}, {"prompt", "You"}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(json::parse(again->body)["choices"][0]["text"],
            json::parse(answer->body)["choices"][0]["text"]);
  // Its directory gone, the service still starts, without it.
  fs::remove_all(adapter);
  TearDown();
  start(o);
  EXPECT_EQ(ids(), std::vector<std::string>{"fortunes"});
}

// response_format's schema is read in the request's order: {"z", "a"} comes out z first.
TEST_F(OpenAiServerTest, JsonSchemaPropertiesComeInTheSchemasOrder) {
  start();
  const std::string body = R"({"model": "fortunes", "max_tokens": 60, "temperature": 0,
      "messages": [{"role": "user", "content": "Tell me a fortune"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "za", "strict": true,
        "schema": {"type": "object", "properties": {"z": {"type": "integer"},
          "a": {"type": "boolean"}}, "required": ["z", "a"]}}}})";
  auto r = client(token_)->Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json answer = json::parse(r->body);
  ASSERT_EQ(answer["choices"][0]["finish_reason"], "stop") << r->body;
  const std::string text = answer["choices"][0]["message"]["content"];
  const auto out = nlohmann::ordered_json::parse(text);
  ASSERT_EQ(out.size(), 2u) << text;
  EXPECT_EQ(out.begin().key(), "z") << text;
  EXPECT_TRUE(out["z"].is_number_integer()) << text;
  EXPECT_TRUE(out["a"].is_boolean()) << text;
}

}  // namespace
}  // namespace zenith::serve::llm
