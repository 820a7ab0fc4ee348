#include "platform/http/guarded_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace zenith::platform {

using Clock = ConnectionState::Clock;

bool wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & (events | POLLHUP | POLLERR));
}

bool GuardedStream::is_readable() const {
  return (ssl_ && SSL_pending(ssl_) > 0) || wait_fd(fd_, POLLIN, read_timeout_ms_);
}

bool GuardedStream::is_writable() const {
  if (!wait_fd(fd_, POLLOUT, write_timeout_ms_)) return false;
  // Readable with nothing to peek at means the peer has gone.
  if (wait_fd(fd_, POLLIN, 0)) {
    char c;
    if (::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return false;
  }
  return true;
}

ssize_t GuardedStream::read(char* ptr, size_t size) {
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

ssize_t GuardedStream::write(const char* ptr, size_t size) {
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

void GuardedStream::account(const char* p, size_t n) {
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

void GuardedStream::address(bool remote, std::string& ip, int& port) const {
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

}  // namespace zenith::platform
