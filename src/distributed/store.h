// Rendezvous key-value stores: where ranks publish their addresses before connecting.
// Each store implements Gloo's Store interface so Gloo contexts can connect through it; all of
// them namespace keys under a prefix and bound every wait by the job's timeout.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace zenith::distributed {

class Store : public gloo::rendezvous::Store {
 public:
  Store(std::string prefix, std::chrono::milliseconds timeout)
      : prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    write(full_key(key), data);
  }
  // Blocks until the key exists (or the timeout passes).
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // A store whose keys live under `prefix` + "/" inside this one (same backend).
  std::unique_ptr<Store> child(const std::string& prefix);
  virtual std::string describe() const = 0;  // "file:///dir", for error messages
  std::chrono::milliseconds timeout() const { return timeout_; }

 protected:
  std::string full_key(const std::string& key) const { return prefix_ + "/" + key; }
  // Backend operations on full keys.
  virtual void write(const std::string& key, const std::vector<char>& data) = 0;
  virtual bool exists(const std::vector<std::string>& keys) = 0;
  virtual std::vector<char> read(const std::string& key) = 0;

 private:
  friend class ChildStore;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

// url: "file:///dir", "redis://host:port", "tcp://host:port". For tcp, the rank that
// `serve` names (world rank 0) runs the server in this process.
std::unique_ptr<Store> make_store(const std::string& url, const std::string& prefix, bool serve,
                                  std::chrono::milliseconds timeout);

std::unique_ptr<Store> make_file_store(const std::string& dir, const std::string& prefix,
                                       std::chrono::milliseconds timeout);
std::unique_ptr<Store> make_redis_store(const std::string& host, int port,
                                        const std::string& prefix,
                                        std::chrono::milliseconds timeout);
std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool serve,
                                      const std::string& prefix, std::chrono::milliseconds timeout);

// "host:port" -> {host, port}; throws a [communication] error naming `what` when malformed.
std::pair<std::string, int> split_host_port(const std::string& s, const std::string& what);

}  // namespace zenith::distributed
