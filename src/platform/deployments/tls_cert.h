// A self-signed TLS certificate for the platform API and HTTPS services: made once with OpenSSL
// and kept in DATA/tls (key mode 0600), so clients can pin it with `curl --cacert cert.pem`. It
// is a leaf certificate (CA:FALSE, serverAuth): trusting it trusts this server's name and key,
// never certificates its key might sign.
#pragma once

#include <string>

namespace zenith::platform {

struct TlsFiles {
  std::string cert;  // PEM
  std::string key;   // PEM, mode 0600
};

// DIR/cert.pem and DIR/key.pem, generated (P-256 key, 10 years, CN and subjectAltName
// localhost, 127.0.0.1 and this host's name) when either is missing, or when the certificate is
// a CA (as zenith made them before). Safe against a concurrent caller: files are written beside
// and renamed under an exclusive lock file.
TlsFiles ensure_self_signed_cert(const std::string& dir);

// Whether the PEM certificate at `cert_pem` says CA:TRUE.
bool is_ca_cert(const std::string& cert_pem);

}  // namespace zenith::platform
