// The OpenAI-compatible LLM service behind `zenith serve MODEL_DIR` and the platform's LLM
// services: one engine (serve/llm/engine.h) behind HTTPS (or plain HTTP), the same hardened
// listener (platform/http/http_guard.h) and hashed service tokens as the KServe service.
//
//   GET  /health                     open: {"status": "ok"}
//   GET  /metrics                    Prometheus text, vLLM's names under zenith: with a token
//                                    of the service or the platform's own (its monitor's)
//   GET  /v1/models[/ID]             the base model and its adapters (with "parent"), or one
//   POST /v1/chat/completions        OpenAI's chat API (stream: server-sent events)
//   POST /v1/completions             OpenAI's legacy completions API
//   POST /v1/load_lora_adapter       {"lora_name", "lora_path"}: platform admin tokens only
//   POST /v1/unload_lora_adapter     {"lora_name"}: platform admin tokens only (vLLM's routes)
// Every answer carries x-request-id; errors are OpenAI's envelope {"error": {"message", "type",
// "param", "code"}} with x-should-retry: false on a 4xx a retry cannot fix.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve/llm/engine.h"

namespace zenith::serve::llm {

struct LlmServeOptions {
  std::string name;  // the base model's id in "model" and /v1/models
  int version = 1;   // the registry version (services)
  std::string host = "127.0.0.1";
  int port = 8443;  // 0: any free port
  bool tls = true;
  std::string cert, key, tls_dir;  // PEM files; empty: a self-signed pair in tls_dir
  std::string token_db;            // SQLite store holding the service's tokens (required)
  std::string admin_token;         // the platform's own admin token (DATA/token), "" if none
  size_t max_body_bytes = 4 << 20;
  int http_threads = 128;
  double ping_interval_s = 10;  // a streamed ": ping" comment after this long without a chunk
  std::string chat_template;    // a built-in template's name; "": the tokenizer's
  // Weights at load, as generate's --dtype: f32, bf16, f16, or GGML blocks q8_0, q4_0, q4_k for
  // the linear layers; "": the file's.
  std::string dtype;
  EngineOptions engine;
  std::vector<std::pair<std::string, std::string>> adapters;  // name, PEFT directory
  // Adapters loaded at run time (/v1/load_lora_adapter) are kept in this file ({"name": dir})
  // and loaded again at start, so that they survive a restart, a rollback and a new version;
  // "": not kept (a platform service keeps them in DATA/services/NAME/adapters.json).
  std::string adapters_file;
};

class LlmServer {
 public:
  // Loads the HF model directory (config.json, safetensors, tokenizer), or a GGUF file (llama
  // architecture, with its vocabulary), and the adapters.
  LlmServer(const std::string& model_dir, LlmServeOptions options);
  ~LlmServer();
  LlmServer(const LlmServer&) = delete;
  LlmServer& operator=(const LlmServer&) = delete;

  int bind();    // the bound port; throws when it cannot
  void serve();  // until stop(); blocks
  void stop();
  std::string url() const;        // https://host:port (http:// with TLS off)
  std::string cert_path() const;  // "" with TLS off
  const LlmServeOptions& options() const;
  Engine& engine();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zenith::serve::llm
