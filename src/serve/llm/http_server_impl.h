// LlmServer's state, shared by its files: http_server.cpp (listener, token gate, models,
// adapters, metrics) and openai_routes.cpp (the completion routes and their streams).
#pragma once

#include <httplib.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "platform/deployments/deployment_store.h"
#include "platform/http/http_guard.h"
#include "serve/llm/http_server.h"
#include "serve/llm/openai_metrics.h"
#include "serve/llm/openai_request.h"
#include "serve/llm/token_bytes.h"
#include "zenith/text.h"

namespace zenith::serve::llm {

struct LlmServer::Impl {
  std::string model_dir;
  LlmServeOptions options;
  std::shared_ptr<text::Tokenizer> tokenizer;
  std::optional<text::ChatTemplate> chat_template;  // none: the model has no chat template
  std::shared_ptr<const TokenBytes> vocab;          // for constrained decoding, made on first use
  std::mutex vocab_mutex;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<platform::TokenVerifier> tokens;
  std::unique_ptr<platform::GuardedServer> server;
  std::string cert;
  int bound_port = 0;
  int64_t created = 0;                // unix seconds: /v1/models' "created"
  std::string root_name;              // /v1/models' "root": the model it was loaded from
  std::string weight_dtype;           // the weights' dtype as loaded (--dtype or the file's)
  int threads = 0;                    // the engine's compute threads
  std::atomic<bool> stopping{false};  // stop(): waiting requests are cancelled

  std::mutex adapters_mutex;
  std::map<std::string, std::string> adapter_dirs;      // name -> directory
  std::map<std::string, std::string> runtime_adapters;  // those loaded at run time (kept)
  void save_runtime_adapters();                         // to options.adapters_file; locked
  void load_runtime_adapters();                         // at start

  // Answers by endpoint and status, and their latency (zenith_serve_* as the KServe service,
  // which `zenith services` reads).
  std::mutex http_mutex;
  HttpCounts http;
  void count(const std::string& endpoint, int status, double seconds);

  std::optional<platform::GateRefusal> authorize(const httplib::Request& req);
  void routes();
  void models(httplib::Response& res, const std::string& only = "");  // only: one model's
  void load_adapter(const httplib::Request& req, httplib::Response& res);
  void unload_adapter(const httplib::Request& req, httplib::Response& res);
  std::string metrics_text();
  std::shared_ptr<const TokenBytes> token_bytes();
  // POST /v1/chat/completions (chat) and /v1/completions: openai_routes.cpp.
  void complete(const httplib::Request& req, httplib::Response& res, bool chat);
};

// Answers `error` in OpenAI's envelope.
void reply_api_error(httplib::Response& res, const ApiError& error);
// A new request id: "req_" and 24 hex digits.
std::string new_request_id();

}  // namespace zenith::serve::llm
