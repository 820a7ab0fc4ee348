// TLS on the platform API: plain HTTP only on loopback; another bind address serves HTTPS with
// a generated leaf certificate the CLI trusts from its data dir (TLS 1.2 or newer), unless
// --insecure-http opts out.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <nlohmann/json.hpp>

#include "platform/deployments/tls_cert.h"
#include "platform/http/api_client.h"
#include "support/files.h"
#include "support/processes.h"
#include "support/raw_http.h"
#include "support/run_zenith.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;
namespace zt = zenith::testing;
using zt::read_all;
using zt::ServerProcess;

namespace {

// Whether a TLS handshake limited to versions [min, max] succeeds on 127.0.0.1:port.
bool handshake(int port, int min_version, int max_version) {
  zt::RawConnection c(port);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, min_version);
  SSL_CTX_set_max_proto_version(ctx, max_version);
  SSL_CTX_set_security_level(ctx, 0);  // let the client offer old versions at all
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, c.fd());
  const bool ok = SSL_connect(ssl) == 1;
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return ok;
}

class PlatformTls : public ::testing::Test {
 protected:
  zt::TempDir dir_{"tls"};
};

}  // namespace

TEST_F(PlatformTls, NonLoopbackBindServesHttpsWithATrustedLeafCertificate) {
  ServerProcess server(dir_.str(), {"--host", "0.0.0.0"});
  ASSERT_EQ(server.url().rfind("https://127.0.0.1:", 0), 0u) << server.url();
  EXPECT_EQ(read_all(dir_.str() + "/server.ca"), dir_.str() + "/tls/cert.pem\n");
  EXPECT_FALSE(zp::is_ca_cert(dir_.str() + "/tls/cert.pem"));
  EXPECT_EQ(server.client().get("/api/v1/jobs").status, 200);
  // Verification is on: a client that does not trust the certificate gets no answer.
  EXPECT_EQ(zp::ApiClient(server.url(), server.token()).get("/api/v1/jobs").status, 0);
  // Plain HTTP to the port is not served.
  {
    zt::RawConnection c(server.port());
    c.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    EXPECT_NE(c.read_reply(5).status, 200);
  }
  EXPECT_TRUE(handshake(server.port(), TLS1_2_VERSION, TLS1_3_VERSION));
  EXPECT_FALSE(handshake(server.port(), TLS1_VERSION, TLS1_1_VERSION));
  // The CLI finds the URL and the certificate in its data dir.
  auto r = zt::run_zenith("jobs --data " + dir_.str());
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST_F(PlatformTls, InsecureHttpIsAnExplicitOptOut) {
  ServerProcess server(dir_.str(), {"--host", "0.0.0.0", "--insecure-http"});
  ASSERT_EQ(server.url().rfind("http://127.0.0.1:", 0), 0u) << server.url();
  EXPECT_EQ(server.client().get("/api/v1/jobs").status, 200);
  EXPECT_NE(read_all(dir_.str() + "/server.log").find("WARNING:   plain HTTP on 0.0.0.0"),
            std::string::npos);
}

TEST_F(PlatformTls, LoopbackStaysPlainHttp) {
  ServerProcess server(dir_.str());
  EXPECT_EQ(server.url().rfind("http://127.0.0.1:", 0), 0u) << server.url();
  EXPECT_FALSE(std::filesystem::exists(dir_.str() + "/server.ca"));
}
