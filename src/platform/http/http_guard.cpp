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
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "platform/http/reply.h"

namespace zenith::platform {

namespace {

using Clock = std::chrono::steady_clock;

// What the stream knows about the request being read on this connection.
struct ConnectionState {
  const HttpLimits* limits = nullptr;
  bool in_head = true;
  std::size_t head_bytes = 0, body_bytes = 0;
  std::uint32_t last4 = 0;  // the last four bytes of the head, to see "\r\n\r\n"
  Clock::time_point head_deadline;
  bool head_overflow = false, body_overflow = false;
  bool close_after = false;  // answer, then close: the rest of the request is not read

  void begin_request() {
    in_head = true;
    head_bytes = body_bytes = 0;
    last4 = 0;
    head_overflow = body_overflow = false;
    head_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(limits->head_timeout_s));
  }
  // Chunk-size lines and CRLFs ride on top of the body's bytes.
  std::size_t body_cap() const {
    return limits->max_body_bytes + limits->max_body_bytes / 8 + 16 * 1024;
  }
};

thread_local ConnectionState* t_connection = nullptr;

bool wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & (events | POLLHUP | POLLERR));
}

// The connection as httplib sees it: reads that stop at the head and body limits.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, SSL* ssl, ConnectionState& state, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd),
        ssl_(ssl),
        state_(state),
        read_timeout_ms_(read_timeout_ms),
        write_timeout_ms_(write_timeout_ms) {}

  bool is_readable() const override {
    return (ssl_ && SSL_pending(ssl_) > 0) || wait_fd(fd_, POLLIN, read_timeout_ms_);
  }

  bool is_writable() const override {
    if (!wait_fd(fd_, POLLOUT, write_timeout_ms_)) return false;
    // Readable with nothing to peek at means the peer has gone.
    if (wait_fd(fd_, POLLIN, 0)) {
      char c;
      if (::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return false;
    }
    return true;
  }

  ssize_t read(char* ptr, size_t size) override {
    ConnectionState& s = state_;
    int timeout_ms = read_timeout_ms_;
    if (s.in_head) {
      if (s.head_bytes >= s.limits->max_head_bytes) {
        s.head_overflow = s.close_after = true;
        return 0;  // httplib sees the line end: 414, or a header section it cannot finish
      }
      size = std::min(size, s.limits->max_head_bytes - s.head_bytes);
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(s.head_deadline - Clock::now());
      if (left.count() <= 0) {
        s.close_after = true;
        return -1;
      }
      timeout_ms = std::min<int>(timeout_ms, int(left.count()));
    } else {
      if (s.body_bytes >= s.body_cap()) {
        s.body_overflow = s.close_after = true;
        return -1;
      }
      size = std::min(size, s.body_cap() - s.body_bytes);
    }
    if (!(ssl_ && SSL_pending(ssl_) > 0) && !wait_fd(fd_, POLLIN, timeout_ms)) return -1;
    ssize_t n;
    if (ssl_) {
      const int r = SSL_read(ssl_, ptr, int(std::min<size_t>(size, INT32_MAX)));
      n = r > 0 ? r : (SSL_get_error(ssl_, r) == SSL_ERROR_ZERO_RETURN ? 0 : -1);
    } else {
      do {
        n = ::recv(fd_, ptr, size, 0);
      } while (n < 0 && errno == EINTR);
    }
    if (n > 0) account(ptr, size_t(n));
    return n;
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_fd(fd_, POLLOUT, write_timeout_ms_)) return -1;
    if (ssl_) {
      const int r = SSL_write(ssl_, ptr, int(std::min<size_t>(size, INT32_MAX)));
      return r > 0 ? r : -1;
    }
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  void account(const char* p, size_t n) {
    ConnectionState& s = state_;
    for (size_t i = 0; i < n; ++i) {
      if (!s.in_head) {
        s.body_bytes += n - i;
        return;
      }
      ++s.head_bytes;
      s.last4 = (s.last4 << 8) | static_cast<unsigned char>(p[i]);
      if (s.last4 == 0x0d0a0d0a) s.in_head = false;
    }
  }

  void address(bool remote, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    auto* sa = reinterpret_cast<sockaddr*>(&a);
    if ((remote ? ::getpeername(fd_, sa, &len) : ::getsockname(fd_, sa, &len)) != 0) return;
    char buf[INET6_ADDRSTRLEN] = "";
    if (a.ss_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&a);
      inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
      port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
      inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
      port = ntohs(in6->sin6_port);
    }
    ip = buf;
  }

  int fd_;
  SSL* ssl_;
  ConnectionState& state_;
  int read_timeout_ms_, write_timeout_ms_;
};

// Connections on threads made as they are needed, up to a cap (then they wait in line); a
// thread idle for `idle_s` ends, down to kKeptThreads, so a burst does not pin its threads.
class ElasticPool final : public httplib::TaskQueue {
 public:
  ElasticPool(std::size_t max_threads, double idle_s)
      : max_(std::max(kKeptThreads, max_threads)), idle_(idle_s) {}
  ~ElasticPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > waiting_ && threads_.size() < max_) {
      std::thread t([this] { work(); });
      const auto id = t.get_id();
      threads_.emplace(id, std::move(t));
    }
    cv_.notify_one();
  }

  void shutdown() override {
    std::map<std::thread::id, std::thread> threads;
    std::vector<std::thread> ended;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      threads.swap(threads_);
      ended.swap(ended_);
    }
    cv_.notify_all();
    for (auto& [id, t] : threads) t.join();
    for (auto& t : ended) t.join();
  }

 private:
  static constexpr std::size_t kKeptThreads = 4;

  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        ++waiting_;
        const bool woken = cv_.wait_for(lock, std::chrono::duration<double>(idle_),
                                        [&] { return stopping_ || !jobs_.empty(); });
        --waiting_;
        if (stopping_ && jobs_.empty()) return;  // shutdown() joins this thread
        if (!woken) {
          if (threads_.size() <= kKeptThreads) continue;
          // Idle too long: hand this thread's handle to the next one that ends (or to
          // shutdown()) to join, and join the one handed over before.
          auto self = threads_.extract(std::this_thread::get_id());
          std::vector<std::thread> previous;
          previous.swap(ended_);
          ended_.push_back(std::move(self.mapped()));
          lock.unlock();
          for (auto& t : previous) t.join();
          return;
        }
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  const std::size_t max_;
  const double idle_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::map<std::thread::id, std::thread> threads_;
  std::vector<std::thread> ended_;  // threads that ended idle, not yet joined
  std::size_t waiting_ = 0;
  bool stopping_ = false;
};

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
    std::function<void(const httplib::Request&, const httplib::Response&)> hook) {
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
