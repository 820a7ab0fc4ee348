// Test support for multi-rank tests: forks one process per rank on this host (loopback only),
// runs a function in each and collects what each rank reported. Also: free ports, a private
// redis-server, and a throwing `expect` for use inside rank processes (gtest assertions do not
// cross fork()). Scratch directories: support/temp_dir.h.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "zenith/communication.h"

namespace zenith::test {

struct RankResult {
  int rank = 0;
  int exit_code = -1;  // 0: fn returned; 1: fn threw (message says what)
  int signal = 0;      // killed by this signal
  bool hung = false;   // still running at the deadline (then killed)
  std::string message;
  bool ok() const { return exit_code == 0 && signal == 0 && !hung; }
};

template <typename... Args>
void expect(bool cond, const Args&... args) {
  if (cond) return;
  std::ostringstream os;
  (os << ... << args);
  throw std::runtime_error(os.str());
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Runs fn(rank) in `n` forked processes. A rank's exception message comes back in `message`.
inline std::vector<RankResult> run_ranks(int n, const std::function<void(int)>& fn,
                                         double timeout_s = 60) {
  struct Child {
    pid_t pid;
    int fd;
  };
  std::vector<Child> children;
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      int code = 0;
      std::string msg;
      try {
        fn(r);
      } catch (const std::exception& e) {
        msg = e.what();
        code = 1;
      } catch (...) {
        msg = "unknown exception";
        code = 1;
      }
      if (!msg.empty()) [[maybe_unused]]
        auto w = write(fds[1], msg.data(), msg.size());
      close(fds[1]);
      _exit(code);  // no static destructors, no gtest teardown in the child
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    children.push_back({pid, fds[0]});
  }
  std::vector<RankResult> results(static_cast<size_t>(n));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::vector<bool> done(static_cast<size_t>(n), false);
  for (int remaining = n; remaining > 0;) {
    for (int r = 0; r < n; ++r) {
      auto& res = results[size_t(r)];
      res.rank = r;
      auto drain = [&] {
        char buf[4096];
        ssize_t got;
        while ((got = read(children[size_t(r)].fd, buf, sizeof buf)) > 0)
          res.message.append(buf, size_t(got));
      };
      drain();
      if (done[size_t(r)]) continue;
      int status = 0;
      if (waitpid(children[size_t(r)].pid, &status, WNOHANG) == children[size_t(r)].pid) {
        drain();
        if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
        done[size_t(r)] = true;
        --remaining;
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (done[size_t(r)]) continue;
        kill(children[size_t(r)].pid, SIGKILL);
        waitpid(children[size_t(r)].pid, nullptr, 0);
        results[size_t(r)].hung = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& c : children) close(c.fd);
  return results;
}

inline std::string describe(const std::vector<RankResult>& results) {
  std::ostringstream os;
  for (const auto& r : results)
    os << "rank " << r.rank << ": exit " << r.exit_code << " signal " << r.signal
       << (r.hung ? " HUNG" : "") << " " << r.message << "\n";
  return os.str();
}

// A TCP port on 127.0.0.1 that was free a moment ago.
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  if (port == 0) throw std::runtime_error("no free port");
  return port;
}

inline bool port_open(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// redis-server on 127.0.0.1 and a random port, without persistence; stopped on destruction.
class RedisServer {
 public:
  static bool installed() { return access("/usr/bin/redis-server", X_OK) == 0 || on_path(); }
  RedisServer() {
    port_ = free_port();
    pid_ = fork();
    if (pid_ == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      const std::string port = std::to_string(port_);
      execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", port.c_str(),
             "--save", "", "--appendonly", "no", "--protected-mode", "yes",
             static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500 && !port_open(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!port_open(port_)) throw std::runtime_error("redis-server did not start");
  }
  ~RedisServer() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  static bool on_path() { return std::system("command -v redis-server >/dev/null 2>&1") == 0; }
  pid_t pid_ = -1;
  int port_ = 0;
};

// Options for rank `rank` of `size` on `store`, with a short timeout.
inline communication::Options rank_options(
    int rank, int size, const std::string& store,
    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  communication::Options o;
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout = timeout;
  o.prefix = "test" + std::to_string(getppid());
  o.address = "127.0.0.1";
  return o;
}

}  // namespace zenith::test
