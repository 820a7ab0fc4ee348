// The listener both model servers (KServe and OpenAI routes) answer on: HTTPS with the given
// certificate, or a self-signed pair made in tls_dir; plain HTTP only when TLS is off.
#pragma once

#include <memory>
#include <string>

#include "platform/http/http_guard.h"

namespace zenith::serve {

struct ListenerOptions {
  std::string host;  // the Host header the listener accepts
  size_t max_body_bytes = 0;
  int http_threads = 4;  // connections served at once (at least 4)
  bool tls = true;
  std::string cert, key;  // PEM files; both empty: a self-signed pair in tls_dir
  std::string tls_dir;
};

// The guarded server for `options`. With TLS on and no certificate given, options.cert and
// options.key are set to the self-signed pair it made.
std::unique_ptr<platform::GuardedServer> make_listener(ListenerOptions& options);

}  // namespace zenith::serve
