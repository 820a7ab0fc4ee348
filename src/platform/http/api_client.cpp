#include "platform/http/api_client.h"

#include <httplib.h>

#include <stdexcept>

#include "platform/jobs/alerts.h"

namespace zenith::platform {

struct ApiClient::Impl {
  std::string server;
  std::string token;
  std::unique_ptr<httplib::Client> client;
};

namespace {

HttpResult to_result(const httplib::Result& r, const std::string& server) {
  HttpResult out;
  if (!r) {
    out.error = "cannot reach the zenith server at " + server + " (" +
                httplib::to_string(r.error()) +
                "); start one with `zenith server` or pass --server / ZENITH_SERVER";
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  return out;
}

}  // namespace

ApiClient::ApiClient(const std::string& server, std::string token, const std::string& ca_cert)
    : impl_(std::make_unique<Impl>()) {
  std::string origin, path;
  if (!split_url(server, &origin, &path))
    throw std::runtime_error("[cli] server URL '" + server + "' is not http(s)://host:port");
  impl_->server = server;
  impl_->token = std::move(token);
  impl_->client = std::make_unique<httplib::Client>(origin);
  impl_->client->set_connection_timeout(5);
  impl_->client->set_read_timeout(60);
  if (origin.rfind("https://", 0) == 0) {
    impl_->client->enable_server_certificate_verification(true);
    if (!ca_cert.empty()) impl_->client->set_ca_cert_path(ca_cert.c_str());
  }
  if (!impl_->token.empty()) impl_->client->set_bearer_token_auth(impl_->token);
}

ApiClient::~ApiClient() = default;

HttpResult ApiClient::get(const std::string& path) {
  return to_result(impl_->client->Get(path), impl_->server);
}

HttpResult ApiClient::post(const std::string& path, const std::string& body) {
  return to_result(impl_->client->Post(path, body, "application/json"), impl_->server);
}

HttpResult ApiClient::stream(const std::string& path,
                             const std::function<bool(const char*, size_t)>& on_data,
                             int idle_timeout_s) {
  impl_->client->set_read_timeout(idle_timeout_s);
  auto r = impl_->client->Get(path, [&](const char* data, size_t n) { return on_data(data, n); });
  HttpResult out = to_result(r, impl_->server);
  return out;
}

}  // namespace zenith::platform
