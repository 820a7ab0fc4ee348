// Bounded work for every request, for both of zenith's HTTP servers (the platform API and
// `zenith serve`), on Debian's cpp-httplib 0.11.4.
//
// That library reads a request line or header line whole before checking its length, reads
// chunked bodies, bodies without a length and inflated gzip/br bodies into memory without any
// limit (CVE-2025-46728, CVE-2025-53628), and keeps a connection open after a rejection. So each
// connection is served here, through the library's own request parser but over a stream that
// counts bytes:
//   - the request line and headers together stop at `max_head_bytes` (414 / 431) and must
//     arrive within `head_timeout_s`;
//   - a body stops at `max_body_bytes` on the wire, whatever its framing (413);
//   - before any body byte is read: Content-Encoding other than identity is 415, a
//     Transfer-Encoding other than chunked 501, a POST/PUT/PATCH with neither length nor
//     chunking 411, a declared length over the limit 413, a Host that does not name this server
//     421 (DNS rebinding), then the caller's gate (authentication);
//   - every rejection closes the connection, and every error reply is JSON.
// Connections run on an elastic pool (threads added up to `max_threads`, idle ones retire), so
// long-lived streams do not starve short requests. TLS (when given) is 1.2 or newer.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zenith::platform {

struct HttpLimits {
  std::size_t max_head_bytes = 64 * 1024;  // request line + headers
  std::size_t max_body_bytes = 4 << 20;    // on the wire
  double head_timeout_s = 30;              // the whole head of a request
  std::size_t max_threads = 256;           // connections served at once
  double idle_thread_s = 10;               // a connection thread idle this long ends
  std::string component = "api";           // error messages start with "[component]"
};

// Where a request's answer is decided before its body is read: nullopt lets it through, else
// {status, message} is answered (and the connection closed).
struct GateRefusal {
  int status;
  std::string message;
};
using RequestGate = std::function<std::optional<GateRefusal>(const httplib::Request&)>;

class GuardedServer : public httplib::Server {
 public:
  // Plain HTTP.
  explicit GuardedServer(HttpLimits limits);
  // HTTPS with this certificate chain and key (PEM files); throws when they are unusable.
  GuardedServer(HttpLimits limits, const std::string& cert_pem, const std::string& key_pem);
  ~GuardedServer() override;

  // Host names (besides IP literals, "localhost" and this machine's name) that may appear in
  // the Host header.
  void allow_host(const std::string& name);
  // Runs after the framing checks and before the body is read.
  void set_gate(RequestGate gate);
  // Sees every reply of status >= 400 (a route's, a rejection's, httplib's own) before it is
  // compressed and sent; it may rewrite the body (the LLM service's OpenAI error envelope).
  void set_error_hook(std::function<void(const httplib::Request&, httplib::Response&)> hook);
  bool tls() const { return ctx_ != nullptr; }

 private:
  bool process_and_close_socket(socket_t sock) override;
  std::optional<GateRefusal> check(const httplib::Request& req) const;
  void install_hooks();

  HttpLimits limits_;
  SSL_CTX* ctx_ = nullptr;
  std::vector<std::string> hosts_;
  RequestGate gate_;
  std::function<void(const httplib::Request&, httplib::Response&)> error_hook_;
};

// Whether a Host header value (with or without its port) names this server: an IP literal,
// "localhost", or one of `names` (case-insensitive).
bool host_allowed(const std::string& host_header, const std::vector<std::string>& names);

// Whether the client of the request this thread serves has gone: it closed or reset its end of
// the connection (a half-close counts). A route that answers only when its work is done polls
// this to stop that work. False on a thread that serves no connection.
bool client_gone();

// The role a request's token was given by the gate ("admin", "viewer"); "" when none.
void set_request_role(const httplib::Request& req, const std::string& role);
std::string request_role(const httplib::Request& req);

}  // namespace zenith::platform
