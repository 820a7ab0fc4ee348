// `zenith server` as a real child process for the platform tests: started on a free port with
// its data dir, reached through the platform's API client, SIGTERMed at the end (or stopped
// earlier with any signal, e.g. SIGKILL for a crash). Needs the platform library, not the
// framework.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "platform/http/api_client.h"
#include "support/files.h"
#include "support/processes.h"

namespace zenith::testing {

class ServerProcess {
 public:
  // `zenith server --port 0 --data DATA_DIR --grace 1s EXTRA_ARGS...`, logging to
  // DATA_DIR/server.log; waits until it has written DATA_DIR/server.url.
  explicit ServerProcess(const std::string& data_dir, std::vector<std::string> extra_args = {}) {
    std::filesystem::create_directories(data_dir);
    std::filesystem::remove(data_dir + "/server.url");
    const std::string log = data_dir + "/server.log";
    std::vector<std::string> args = {"zenith", "server", "--port",  "0",
                                     "--data", data_dir, "--grace", "1s"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execv(ZENITH_BINARY, argv.data());
      _exit(127);
    }
    const bool up = wait_for([&] { return !read_all(data_dir + "/server.url").empty(); }, 20);
    if (!up) ADD_FAILURE() << "server did not start: " << read_all(log);
    url_ = without_newlines(read_all(data_dir + "/server.url"));
    token_ = without_newlines(read_all(data_dir + "/token"));
    // A self-signed certificate's path, which clients trust (empty for plain HTTP).
    ca_ = without_newlines(read_all(data_dir + "/server.ca"));
  }
  ~ServerProcess() { stop(SIGTERM); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Sends `sig` and reaps the server; its wait status (-1 when already stopped).
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = -1;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return status;
  }

  // A client with the server's own (admin) token, or with `token` ("" for none).
  platform::ApiClient client() const { return platform::ApiClient(url_, token_, ca_); }
  platform::ApiClient client(const std::string& token) const {
    return platform::ApiClient(url_, token, ca_);
  }
  const std::string& url() const { return url_; }
  const std::string& token() const { return token_; }
  // The server's process id (0 once stopped).
  pid_t pid() const { return pid_; }
  // The port it listens on.
  int port() const { return std::atoi(url_.substr(url_.rfind(':') + 1).c_str()); }

 private:
  static std::string without_newlines(std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  std::string url_, token_, ca_;
  pid_t pid_ = 0;
};

// A response's JSON body (null when empty); throws on malformed JSON, as a failing test should.
inline nlohmann::json json_body(const platform::HttpResult& r) {
  return nlohmann::json::parse(r.body.empty() ? "null" : r.body);
}

}  // namespace zenith::testing
