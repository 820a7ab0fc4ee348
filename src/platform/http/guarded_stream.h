// The connection as GuardedServer's request parser sees it (http_guard.h): a socket, or a TLS
// session over it, whose reads stop at the request's head and body limits.
#pragma once

#include <httplib.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>

#include "platform/http/http_guard.h"

namespace zenith::platform {

// What the stream knows about the request being read on this connection.
struct ConnectionState {
  using Clock = std::chrono::steady_clock;

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

// Whether `fd` is ready for `events` within `timeout_ms` (EINTR retried).
bool wait_fd(int fd, short events, int timeout_ms);

// Reads that stop at the head and body limits.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, SSL* ssl, ConnectionState& state, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd),
        ssl_(ssl),
        state_(state),
        read_timeout_ms_(read_timeout_ms),
        write_timeout_ms_(write_timeout_ms) {}

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  void account(const char* p, size_t n);
  void address(bool remote, std::string& ip, int& port) const;

  int fd_;
  SSL* ssl_;
  ConnectionState& state_;
  int read_timeout_ms_, write_timeout_ms_;
};

}  // namespace zenith::platform
