#include "serve/listener.h"

#include <algorithm>

#include "platform/deployments/tls_cert.h"
#include "zenith/error.h"

namespace zenith::serve {

std::unique_ptr<platform::GuardedServer> make_listener(ListenerOptions& options) {
  platform::HttpLimits limits;
  limits.max_body_bytes = options.max_body_bytes;
  limits.max_threads = size_t(std::max(4, options.http_threads));
  limits.component = "serve";
  std::unique_ptr<platform::GuardedServer> server;
  if (options.tls) {
    if (options.cert.empty() != options.key.empty())
      ZENITH_FAIL("[serve] give both --cert and --key, or neither (a self-signed pair)");
    if (options.cert.empty()) {
      ZENITH_CHECK(!options.tls_dir.empty(), "[serve] no directory for the self-signed cert");
      auto files = platform::ensure_self_signed_cert(options.tls_dir);
      options.cert = files.cert;
      options.key = files.key;
    }
    server = std::make_unique<platform::GuardedServer>(limits, options.cert, options.key);
  } else {
    server = std::make_unique<platform::GuardedServer>(limits);
  }
  server->allow_host(options.host);
  return server;
}

}  // namespace zenith::serve
