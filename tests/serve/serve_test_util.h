// Helpers for the serve tests: a small SeedCNN checkpoint, an in-process service and its HTTPS
// client (temp dirs and files: tests/support/).
#pragma once

#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "serve/inference_server.h"
#include "zenith/zenith.h"

namespace zenith::serve::test {

// A randomly initialised 1x28x28 SeedCNN checkpoint as `zenith train` writes it.
inline std::string write_seedcnn_checkpoint(const std::string& dir, uint64_t seed = 7) {
  manual_seed(seed);
  auto net = models::seed_cnn(1, 28, 10);
  const std::string path = dir + "/checkpoint_epoch_1.safetensors";
  io::save_checkpoint(
      path, *net, nullptr,
      {{"config", R"({"model": "seedcnn", "dataset": "fashion-mnist"})"}, {"epoch", "1"}});
  return path;
}

// An in-process service on a free port, served from a background thread.
struct RunningServer {
  std::unique_ptr<InferenceServer> server;
  std::thread thread;
  int port = 0;
  RunningServer(const std::string& package_dir, ServeOptions options) {
    options.port = 0;
    server = std::make_unique<InferenceServer>(package_dir, options);
    port = server->bind();
    thread = std::thread([this] { server->serve(); });
  }
  ~RunningServer() {
    server->stop();
    thread.join();
  }
  // A client that verifies the service's certificate (TLS on) or plain HTTP.
  std::unique_ptr<httplib::Client> client(const std::string& token = "") const {
    auto c = std::make_unique<httplib::Client>(server->url());
    if (server->options().tls) {
      c->enable_server_certificate_verification(true);
      c->set_ca_cert_path(server->cert_path().c_str());
    }
    c->set_connection_timeout(5);
    c->set_read_timeout(30);
    if (!token.empty()) c->set_bearer_token_auth(token);
    return c;
  }
};

}  // namespace zenith::serve::test
