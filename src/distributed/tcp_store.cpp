// TCP rendezvous store: world rank 0 serves a key-value map on host:port (the torchrun
// MASTER_ADDR:MASTER_PORT convention); every rank, rank 0 included, is a client.
// Wire format (host byte order; ranks of one job share an architecture):
//   request  u8 op, u32 key length, key, [SET: u32 value length, value]
//   response SET: u8 1; CHECK: u8 0|1; GET: u32 length (0xffffffff when missing), value
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "distributed/store.h"
#include "distributed/util.h"
#include "zenith/error.h"

namespace zenith::distributed {

namespace {

enum Op : uint8_t { kSet = 1, kCheck = 2, kGet = 3 };
constexpr uint32_t kMissing = 0xffffffffu;

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

struct AddrInfoFree {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};

std::unique_ptr<addrinfo, AddrInfoFree> resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  ZENITH_CHECK(rc == 0, "[communication] tcp store: cannot resolve ", host, ": ", gai_strerror(rc));
  return std::unique_ptr<addrinfo, AddrInfoFree>(res);
}

bool is_loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  return false;
}

// The server: one thread polling the listening socket and every client connection.
class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& host, int port) {
    auto ai = resolve(host, port);
    // A loopback master listens on loopback only; any other host name listens on every
    // interface, since its name may resolve differently here than on the other hosts.
    sockaddr_storage addr{};
    std::memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    if (!is_loopback(ai->ai_addr)) {
      if (addr.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in*>(&addr)->sin_addr.s_addr = htonl(INADDR_ANY);
      else
        reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr = in6addr_any;
    }
    listen_ = Fd(socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ZENITH_CHECK(listen_.get() >= 0, "[communication] tcp store: socket: ", std::strerror(errno));
    int on = 1;
    setsockopt(listen_.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    ZENITH_CHECK(bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), ai->ai_addrlen) == 0 &&
                     ::listen(listen_.get(), 128) == 0,
                 "[communication] tcp store: rank 0 cannot listen on ", host, ":", port, ": ",
                 std::strerror(errno), " (is MASTER_PORT free?)");
    int pipe_fds[2];
    ZENITH_CHECK(pipe2(pipe_fds, O_CLOEXEC) == 0, "[communication] tcp store: pipe failed");
    wake_read_ = Fd(pipe_fds[0]);
    wake_write_ = Fd(pipe_fds[1]);
    thread_ = std::thread([this] { loop(); });
  }
  ~TcpStoreServer() {
    char c = 0;
    [[maybe_unused]] auto n = ::write(wake_write_.get(), &c, 1);
    thread_.join();
  }

 private:
  struct Client {
    Fd fd;
    std::string in;
  };

  void loop() {
    std::vector<Client> clients;
    for (;;) {
      std::vector<pollfd> fds{{wake_read_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
      for (auto& c : clients) fds.push_back({c.fd.get(), POLLIN, 0});
      if (poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;
      const size_t polled = clients.size();  // fds[2..] covers these; new ones wait a round
      if (fds[1].revents & POLLIN) {
        int fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) clients.push_back({Fd(fd), {}});
      }
      for (size_t i = 0; i < polled; ++i) {
        if (!(fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[65536];
        ssize_t n = ::recv(clients[i].fd.get(), buf, sizeof buf, 0);
        if (n <= 0) {
          clients[i].fd.reset();  // closed by the client
          continue;
        }
        clients[i].in.append(buf, size_t(n));
        if (!serve(clients[i])) clients[i].fd.reset();  // malformed request
      }
      std::erase_if(clients, [](const Client& c) { return c.fd.get() < 0; });
    }
  }

  // Answers every complete request buffered for `c`; false when the connection must close.
  bool serve(Client& c) {
    for (;;) {
      auto& in = c.in;
      auto u32_at = [&](size_t pos, uint32_t* v) {
        if (in.size() < pos + 4) return false;
        std::memcpy(v, in.data() + pos, 4);
        return true;
      };
      uint32_t klen = 0, vlen = 0;
      if (in.empty() || !u32_at(1, &klen) || in.size() < 5 + size_t(klen)) return true;
      const uint8_t op = uint8_t(in[0]);
      std::string key = in.substr(5, klen);
      size_t used = 5 + klen;
      std::string reply;
      if (op == kSet) {
        if (!u32_at(used, &vlen) || in.size() < used + 4 + vlen) return true;
        data_[key] = in.substr(used + 4, vlen);
        used += 4 + vlen;
        reply.assign(1, char(1));
      } else if (op == kCheck) {
        reply.assign(1, char(data_.count(key) ? 1 : 0));
      } else if (op == kGet) {
        auto it = data_.find(key);
        uint32_t len = it == data_.end() ? kMissing : uint32_t(it->second.size());
        reply.assign(reinterpret_cast<const char*>(&len), 4);
        if (it != data_.end()) reply += it->second;
      } else {
        return false;
      }
      in.erase(0, used);
      // Replies are small and clients block reading them, so a blocking send is fine.
      if (::send(c.fd.get(), reply.data(), reply.size(), MSG_NOSIGNAL) != ssize_t(reply.size()))
        return false;
    }
  }

  Fd listen_, wake_read_, wake_write_;
  std::map<std::string, std::string> data_;  // touched by the server thread only
  std::thread thread_;
};

class TcpStore : public Store {
 public:
  TcpStore(std::string host, int port, bool serve, const std::string& prefix,
           std::chrono::milliseconds timeout)
      : Store(prefix, timeout), host_(std::move(host)), port_(port) {
    if (serve) server_ = std::make_unique<TcpStoreServer>(host_, port_);
    const auto start = Clock::now();
    for (;;) {  // rank 0 may not be listening yet
      std::string error;
      if (try_connect(&error)) break;
      ZENITH_CHECK(Clock::now() - start < timeout,
                   "[communication] tcp store: cannot reach rank 0 at ", host_, ":", port_,
                   " within ", format_seconds(timeout), ": ", error);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::string describe() const override { return "tcp://" + host_ + ":" + std::to_string(port_); }

 protected:
  void write(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string req = request(kSet, key);
    append_u32(req, uint32_t(data.size()));
    req.append(data.data(), data.size());
    send_all(req);
    recv_exact(1);
  }
  bool exists(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& k : keys) {
      send_all(request(kCheck, k));
      if (recv_exact(1)[0] == 0) return false;
    }
    return true;
  }
  std::vector<char> read(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    send_all(request(kGet, key));
    uint32_t len = 0;
    auto head = recv_exact(4);
    std::memcpy(&len, head.data(), 4);
    ZENITH_CHECK(len != kMissing, "[communication] tcp store: key ", key, " missing");
    auto value = recv_exact(len);
    return std::vector<char>(value.begin(), value.end());
  }

 private:
  bool try_connect(std::string* error) {
    auto ai = resolve(host_, port_);
    Fd fd(socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0 || ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      *error = std::strerror(errno);
      return false;
    }
    timeval tv{10, 0};  // a live server answers at once; never block forever on a dead one
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int on = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    fd_ = std::move(fd);
    return true;
  }
  static void append_u32(std::string& s, uint32_t v) {
    s.append(reinterpret_cast<const char*>(&v), 4);
  }
  static std::string request(Op op, const std::string& key) {
    std::string s(1, char(op));
    append_u32(s, uint32_t(key.size()));
    return s + key;
  }
  void send_all(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      ssize_t n = ::send(fd_.get(), s.data() + done, s.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      ZENITH_CHECK(n > 0, "[communication] tcp store ", describe(),
                   ": send failed: ", std::strerror(errno), " (rank 0 gone?)");
      done += size_t(n);
    }
  }
  std::string recv_exact(size_t len) {
    std::string s(len, '\0');
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::recv(fd_.get(), s.data() + done, len - done, 0);
      if (n < 0 && errno == EINTR) continue;
      ZENITH_CHECK(n > 0, "[communication] tcp store ", describe(), ": connection lost",
                   n < 0 ? std::string(": ") + std::strerror(errno) : "", " (rank 0 gone?)");
      done += size_t(n);
    }
    return s;
  }

  std::string host_;
  int port_;
  std::unique_ptr<TcpStoreServer> server_;
  std::mutex mutex_;
  Fd fd_;
};

}  // namespace

std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool serve,
                                      const std::string& prefix,
                                      std::chrono::milliseconds timeout) {
  return std::make_unique<TcpStore>(host, port, serve, prefix, timeout);
}

}  // namespace zenith::distributed
