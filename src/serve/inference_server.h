// The inference service behind `zenith serve`: one model package over HTTPS (cpp-httplib's
// SSLServer on OpenSSL) with the KServe v2 REST protocol, dynamic batching, bearer tokens
// scoped to the service, and Prometheus metrics.
//
//   GET  /v2/health/live, /v2/health/ready       no token needed
//   GET  /v2                                      server metadata, no token needed
//   GET  /v2/models/{name}[/versions/{v}]         model metadata
//   GET  /v2/models/{name}/ready
//   POST /v2/models/{name}[/versions/{v}]/infer   {"inputs":[{"name","shape","datatype","data"}]}
//        datatype FP32: the model's input as is; UINT8: raw pixels (CHW), preprocessed here.
//        Outputs: logits and probabilities (FP32 [N, K]), class (INT64 [N]), label (BYTES [N]).
//   POST /v2/models/{name}/classify[?top_k=K]    a PNG or JPEG body; top-k labels with
//        probabilities: {"model_name", "model_version", "predictions": [{"label", "class",
//        "probability"}]}
//   GET  /metrics                                 Prometheus text, no token needed
// Errors are {"error": "..."}: 400 bad input, 401 no or bad token, 403 another service's token,
// 404 unknown model or endpoint, 411 no length, 413 body or image too large, 415 not an image
// or a compressed body, 429 queue full, 504 no answer within the request timeout. Bodies,
// headers and JSON nesting are bounded before anything is decoded (platform/http/http_guard.h).
#pragma once

#include <memory>
#include <string>

#include "serve/batcher.h"
#include "serve/package.h"

namespace zenith::serve {

struct ServeOptions {
  std::string name;  // the model's name in URLs; "" : the package's
  int version = 1;   // the registry version, reported in responses
  std::string host = "127.0.0.1";
  int port = 8443;        // 0: any free port
  bool tls = true;        // plain HTTP only when false
  std::string cert, key;  // PEM files; empty: a self-signed pair in tls_dir
  std::string tls_dir;
  std::string token_db;     // SQLite store holding the service's tokens (required)
  std::string admin_token;  // the platform's own token (DATA/token): /metrics too; "" if none
  BatchOptions batch;
  double timeout_s = 30;  // per request, queue wait plus run
  size_t max_body_bytes = 8 << 20;
  int64_t max_image_pixels = 4096 * 4096;  // /classify: larger images are 413 before decoding
  int max_request_samples = 256;
  int http_threads = 128;  // connections served at once
};

class InferenceServer {
 public:
  InferenceServer(const std::string& package_dir, ServeOptions options);
  ~InferenceServer();
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  // Binds host:port; returns the bound port. Throws when it cannot.
  int bind();
  // Serves until stop(); blocks.
  void serve();
  void stop();
  // https://host:port (http:// with TLS off).
  std::string url() const;
  const PackageSpec& package() const;
  const ServeOptions& options() const;
  // The certificate clients should trust (empty with TLS off).
  std::string cert_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zenith::serve
