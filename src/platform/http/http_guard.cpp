#include "platform/http/http_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "platform/http/elastic_pool.h"
#include "platform/http/guarded_stream.h"
#include "platform/http/reply.h"

namespace zenith::platform {

namespace {

using Clock = ConnectionState::Clock;

thread_local ConnectionState* t_connection = nullptr;
thread_local int t_socket = -1;  // the connection this thread serves, for client_gone()

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* status_text(int status) {
  switch (status) {
    case 400:
      return "malformed request";
    case 404:
      return "no such endpoint";
    case 405:
      return "method not allowed";
    case 408:
      return "the request did not arrive in time";
    case 411:
      return "a request body needs Content-Length or chunked transfer encoding";
    case 413:
      return "request body too large";
    case 414:
      return "request line too long";
    case 415:
      return "unsupported Content-Encoding (send the body uncompressed)";
    case 416:
      return "bad Range header";
    case 431:
      return "request header fields too large";
    default:
      return "request failed";
  }
}

// Answer, then close: marks the request so httplib says "Connection: close".
void close_after(const httplib::Request& req) {
  if (t_connection) t_connection->close_after = true;
  auto& r = const_cast<httplib::Request&>(req);
  r.headers.erase("Connection");
  r.headers.emplace("Connection", "close");
}

}  // namespace

bool host_allowed(const std::string& header, const std::vector<std::string>& names) {
  std::string host = lower(header);
  if (!host.empty() && host.front() == '[') {  // [v6]:port
    const auto end = host.find(']');
    if (end == std::string::npos) return false;
    in6_addr a6;
    return inet_pton(AF_INET6, host.substr(1, end - 1).c_str(), &a6) == 1;
  }
  if (std::count(host.begin(), host.end(), ':') == 1) host = host.substr(0, host.find(':'));
  if (!host.empty() && host.back() == '.') host.pop_back();
  in_addr a4;
  in6_addr a6;
  // An IP literal cannot be a rebinding target: rebinding needs a name the attacker resolves.
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1)
    return true;
  if (host == "localhost") return true;
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return !n.empty() && lower(n) == host; });
}

void set_request_role(const httplib::Request& req, const std::string& role) {
  auto& headers = const_cast<httplib::Request&>(req).headers;
  headers.erase("Zenith-Role");
  if (!role.empty()) headers.emplace("Zenith-Role", role);
}

std::string request_role(const httplib::Request& req) {
  return req.get_header_value("Zenith-Role");
}

GuardedServer::GuardedServer(HttpLimits limits) : limits_(std::move(limits)) {
  char name[256] = "";
  if (gethostname(name, sizeof name - 1) == 0) hosts_.push_back(name);
  install_hooks();
}

GuardedServer::GuardedServer(HttpLimits limits, const std::string& cert_pem,
                             const std::string& key_pem)
    : GuardedServer(std::move(limits)) {
  ctx_ = SSL_CTX_new(TLS_server_method());
  if (!ctx_) throw std::runtime_error("[" + limits_.component + "] cannot make a TLS context");
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx_, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(ctx_, cert_pem.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx_, key_pem.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx_) != 1) {
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw std::runtime_error("[" + limits_.component + "] cannot use certificate " + cert_pem +
                             " and key " + key_pem + " (unreadable, or they do not match)");
  }
}

GuardedServer::~GuardedServer() {
  if (ctx_) SSL_CTX_free(ctx_);
}

void GuardedServer::allow_host(const std::string& name) { hosts_.push_back(name); }

void GuardedServer::set_gate(RequestGate gate) { gate_ = std::move(gate); }

void GuardedServer::set_error_hook(
    std::function<void(const httplib::Request&, httplib::Response&)> hook) {
  error_hook_ = std::move(hook);
}

std::optional<GateRefusal> GuardedServer::check(const httplib::Request& req) const {
  const std::string& who = limits_.component;
  set_request_role(req, "");  // only the gate says who a request is
  if (req.has_header("Host") && !host_allowed(req.get_header_value("Host"), hosts_))
    return GateRefusal{421, "[" + who + "] Host '" + req.get_header_value("Host") +
                                "' does not name this server (start it with --allowed-host " +
                                "NAME to answer to that name)"};
  const std::string encoding = lower(req.get_header_value("Content-Encoding"));
  if (!encoding.empty() && encoding != "identity")
    return GateRefusal{415, "[" + who + "] Content-Encoding '" + encoding +
                                "' is not accepted: send the body uncompressed"};
  const bool chunked = req.has_header("Transfer-Encoding");
  const bool has_length = req.has_header("Content-Length");
  if (chunked && lower(req.get_header_value("Transfer-Encoding")) != "chunked")
    return GateRefusal{501, "[" + who + "] Transfer-Encoding '" +
                                req.get_header_value("Transfer-Encoding") +
                                "' is not supported (only chunked)"};
  if (chunked && has_length)
    return GateRefusal{400, "[" + who + "] both Content-Length and Transfer-Encoding"};
  const std::string length_text = req.get_header_value("Content-Length");
  if (has_length &&
      (length_text.empty() || length_text.find_first_not_of("0123456789") != std::string::npos ||
       length_text.size() > 18))
    return GateRefusal{has_length && length_text.size() > 18 ? 413 : 400,
                       "[" + who + "] bad Content-Length '" + length_text + "'"};
  const std::uint64_t length = has_length ? std::stoull(length_text) : 0;
  const bool takes_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
  if (takes_body && !has_length && !chunked)
    return GateRefusal{411, "[" + who + "] " + status_text(411)};
  if (!takes_body && req.method != "DELETE" && (chunked || length > 0))
    return GateRefusal{400, "[" + who + "] a " + req.method + " request carries no body"};
  if (req.method == "DELETE" && chunked)
    return GateRefusal{400, "[" + who + "] a DELETE request carries no body"};
  if (length > limits_.max_body_bytes)
    return GateRefusal{413, "[" + who + "] request body of " + std::to_string(length) +
                                " bytes is over the limit of " +
                                std::to_string(limits_.max_body_bytes)};
  if (gate_) return gate_(req);
  return std::nullopt;
}

void GuardedServer::install_hooks() {
  set_payload_max_length(limits_.max_body_bytes);
  const std::size_t threads = limits_.max_threads;
  const double idle_s = limits_.idle_thread_s;
  new_task_queue = [threads, idle_s] { return new ElasticPool(threads, idle_s); };
  set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    auto refusal = check(req);
    if (!refusal) return HandlerResponse::Unhandled;
    close_after(req);
    if (refusal->status == 401) res.set_header("WWW-Authenticate", "Bearer");
    reply_error(res, refusal->status, refusal->message);
    return HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (unparsable request, over a limit, no route) become JSON, and
  // the stream's limits decide which 4xx it was.
  set_error_handler(
      HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        ConnectionState* s = t_connection;
        if (s && s->body_overflow) {
          res.status = 413;
          res.body.clear();
        } else if (s && s->head_overflow && res.status != 414) {
          res.status = 431;
          res.body.clear();
        }
        if (s && (s->body_overflow || s->head_overflow || res.status == 400)) close_after(req);
        if (error_hook_) error_hook_(req, res);
        if (!res.body.empty()) return HandlerResponse::Unhandled;
        std::string message = status_text(res.status);
        if (res.status == 413)
          message += " (limit " + std::to_string(limits_.max_body_bytes) + " bytes)";
        if (res.status == 431 || res.status == 414)
          message += " (limit " + std::to_string(limits_.max_head_bytes) + " bytes)";
        if (res.status == 404) message += ": " + req.method + " " + req.path;
        reply_error(res, res.status, "[" + limits_.component + "] " + message);
        return HandlerResponse::Handled;
      }));
  set_exception_handler(
      [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        reply_error(res, 500, "[" + limits_.component + "] internal error: " + what);
      });
}

bool client_gone() {
  if (t_socket < 0) return false;
  pollfd p{t_socket, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  const int read_ms = int(read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000);
  const int write_ms = int(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
  SSL* ssl = nullptr;
  bool ret = false;
  if (ctx_) {
    // The handshake blocks with the socket's own timeouts.
    timeval tv{std::max<time_t>(1, read_timeout_sec_), 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ssl = SSL_new(ctx_);
    if (ssl && SSL_set_fd(ssl, sock) == 1 && SSL_accept(ssl) == 1) {
      ret = true;
    } else {
      ERR_clear_error();
      if (ssl) SSL_free(ssl);
      ssl = nullptr;
    }
  }
  bool linger = false;
  if (!ctx_ || ssl) {
    ConnectionState state;
    state.limits = &limits_;
    t_connection = &state;
    t_socket = int(sock);
    std::size_t count = keep_alive_max_count_;
    while (svr_sock_ != INVALID_SOCKET && count > 0 &&
           ((ssl && SSL_pending(ssl) > 0) ||
            wait_fd(sock, POLLIN, int(keep_alive_timeout_sec_ * 1000)))) {
      state.begin_request();
      bool connection_closed = false;
      GuardedStream strm(sock, ssl, state, read_ms, write_ms);
      ret = process_request(strm, count == 1, connection_closed, nullptr);
      if (!ret || connection_closed || state.close_after) break;
      --count;
    }
    linger = state.close_after;
    t_connection = nullptr;
    t_socket = -1;
  }
  if (ssl) {
    SSL_shutdown(ssl);
    SSL_free(ssl);
  }
  if (linger) {
    // A refused request's body may still be on its way: stop sending, then read and drop what
    // comes for a moment (bounded in bytes and time), so that the client reads the answer
    // instead of a connection reset.
    ::shutdown(sock, SHUT_WR);
    const auto until = Clock::now() + std::chrono::seconds(2);
    char sink[16384];
    std::size_t drained = 0;
    while (drained < (std::size_t(16) << 20)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0 || !wait_fd(sock, POLLIN, int(left))) break;
      const ssize_t n = ::recv(sock, sink, sizeof sink, 0);
      if (n <= 0) break;
      drained += std::size_t(n);
    }
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace zenith::platform
