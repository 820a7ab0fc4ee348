// Hand-made HTTP/1.1 for attack probes: any bytes on a TCP (or TLS) connection to a real server,
// the reply read back as it comes, and the memory the server process holds (/proc). Needs
// OpenSSL (TLS probes), nothing of the framework.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

namespace zenith::testing {

// A kB figure of /proc/PID/status ("VmRSS", "VmHWM"); -1 when the process is gone.
inline long proc_status_kb(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
  return -1;
}

// Resets the process's peak resident size (VmHWM) to its current size (Linux >= 4.0).
inline void reset_peak_rss(int pid) {
  std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5";
}

// Peak resident growth of `pid` while `probe` runs, in MiB.
template <typename Fn>
double peak_rss_growth_mib(int pid, Fn probe) {
  reset_peak_rss(pid);
  const long before = proc_status_kb(pid, "VmRSS");
  probe();
  return double(proc_status_kb(pid, "VmHWM") - before) / 1024.0;
}

struct RawReply {
  int status = 0;    // 0: no reply (the connection closed, reset or timed out first)
  std::string head;  // status line and headers
  std::string body;  // as received (chunked framing left in place)
  bool closed = false;
};

// One connection to 127.0.0.1:PORT, plain or TLS (verified against `ca_file`).
class RawConnection {
 public:
  explicit RawConnection(int port, const std::string& ca_file = "") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (!ok_ || ca_file.empty()) return;
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    ok_ = SSL_connect(ssl_) == 1;
  }
  ~RawConnection() {
    if (ssl_) SSL_free(ssl_);
    if (ctx_) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return ok_; }
  int fd() const { return fd_; }  // the TCP socket, for a probe's own TLS handshake

  // Sends all of `data`; false once the peer closed or reset the connection.
  bool send(std::string_view data) {
    while (ok_ && !data.empty()) {
      const int n = ssl_ ? SSL_write(ssl_, data.data(), int(data.size()))
                         : int(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL));
      if (n <= 0)
        ok_ = false;
      else
        data.remove_prefix(size_t(n));
    }
    return ok_;
  }

  // Whether reply bytes are waiting (the server answered before the request was complete).
  bool reply_waiting(int timeout_ms = 0) {
    if (ssl_ && SSL_pending(ssl_) > 0) return true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, int(std::max<long long>(0, left))) <= 0) return false;
      if (!ssl_) return true;
      // TLS records that are not application data (TLS 1.3 session tickets arrive right after
      // the handshake) are no reply: peek without blocking, and wait on when that was all.
      const int flags = ::fcntl(fd_, F_GETFL);
      ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
      char c;
      const int n = SSL_peek(ssl_, &c, 1);
      const int err = n > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, n);
      ::fcntl(fd_, F_SETFL, flags);
      if (n > 0 || (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)) return true;
      ERR_clear_error();
      if (left <= 0) return false;
    }
  }

  // Reads a reply: the head, then Content-Length bytes, a chunked body up to its last chunk, or
  // everything until the server closes; gives up after `timeout_s`.
  RawReply read_reply(double timeout_s = 30) {
    RawReply r;
    std::string data;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    auto complete = [&] {
      const auto end = data.find("\r\n\r\n");
      if (end == std::string::npos) return false;
      const std::string head = data.substr(0, end);
      const std::string body = data.substr(end + 4);
      std::string lower = head;
      for (auto& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (auto cl = lower.find("content-length:"); cl != std::string::npos)
        return body.size() >= std::stoul(lower.substr(cl + 15));
      if (lower.find("transfer-encoding: chunked") != std::string::npos)
        return body.find("\r\n0\r\n\r\n") != std::string::npos || body.rfind("0\r\n\r\n", 0) == 0;
      return false;
    };
    char buf[65536];
    while (!complete()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0 || !reply_waiting(int(left))) break;
      const int n = ssl_ ? SSL_read(ssl_, buf, sizeof buf) : int(::recv(fd_, buf, sizeof buf, 0));
      if (n <= 0) {
        r.closed = true;
        break;
      }
      data.append(buf, size_t(n));
    }
    const auto end = data.find("\r\n\r\n");
    if (data.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) return r;
    r.head = data.substr(0, end);
    r.body = data.substr(end + 4);
    r.status = std::atoi(r.head.c_str() + 9);
    return r;
  }

  // Sends a request head, then `body_bytes` of `fill` in pieces (as chunks when `chunked`),
  // stopping as soon as the server answers or closes; returns the reply.
  RawReply send_streamed(const std::string& head, std::size_t body_bytes, bool chunked,
                         char fill = 'a') {
    send(head);
    const std::string piece(64 * 1024, fill);
    std::ostringstream chunk_head;
    chunk_head << std::hex << piece.size() << "\r\n";
    std::size_t sent = 0;
    while (ok_ && sent < body_bytes && !reply_waiting()) {
      const std::size_t n = std::min(piece.size(), body_bytes - sent);
      if (chunked) {
        std::ostringstream h;
        h << std::hex << n << "\r\n";
        send(h.str());
      }
      send(std::string_view(piece).substr(0, n));
      if (chunked) send("\r\n");
      sent += n;
    }
    if (chunked && sent == body_bytes) send("0\r\n\r\n");
    return read_reply();
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

}  // namespace zenith::testing
