// A self-signed TLS certificate for HTTPS services: made once with OpenSSL and kept beside the
// service's data (key mode 0600), so clients can pin it with `curl --cacert cert.pem`.
#pragma once

#include <string>

namespace zenith::platform {

struct TlsFiles {
  std::string cert;  // PEM
  std::string key;   // PEM, mode 0600
};

// DIR/cert.pem and DIR/key.pem, generated (P-256 key, 10 years, CN and subjectAltName
// localhost, 127.0.0.1 and this host's name) when either is missing. Safe against a concurrent
// caller: files are written beside and renamed under an exclusive lock file.
TlsFiles ensure_self_signed_cert(const std::string& dir);

}  // namespace zenith::platform
