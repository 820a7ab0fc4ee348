// A small HTTP client for the platform API, used by the CLI (keeps cpp-httplib out of it).
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace zenith::platform {

struct HttpResult {
  int status = 0;  // 0 when no response came back
  std::string body;
  std::string error;  // transport error, when status is 0
};

class ApiClient {
 public:
  // `server` like http://127.0.0.1:7070 or https://host:7443; `token` may be empty (then only
  // /healthz answers). An https server's certificate is always verified: against `ca_cert`
  // (a PEM file, e.g. the self-signed DATA/tls/cert.pem) when given, else the system's CAs.
  ApiClient(const std::string& server, std::string token, const std::string& ca_cert = "");
  ~ApiClient();

  HttpResult get(const std::string& path);
  HttpResult post(const std::string& path, const std::string& json_body);
  // Streams a response body chunk by chunk; `on_data` returns false to stop. Gives up when no
  // byte arrives for `idle_timeout_s`.
  HttpResult stream(const std::string& path,
                    const std::function<bool(const char*, size_t)>& on_data,
                    int idle_timeout_s = 24 * 3600);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zenith::platform
