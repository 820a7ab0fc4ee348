// Store base (blocking get/wait with a timeout), prefixed child stores, the URL factory and the
// file store (one file per key in a directory every rank can see).
#include "distributed/store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "distributed/util.h"
#include "zenith/error.h"

namespace zenith::distributed {

namespace fs = std::filesystem;

void Store::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(full_key(k));
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::milliseconds(1);
  // Polling is fine: stores are only used while ranks connect, not per collective.
  while (!exists(full)) {
    if (std::chrono::steady_clock::now() - start >= timeout) {
      std::string missing;
      for (const auto& k : full) missing += (missing.empty() ? "" : ", ") + k;
      ZENITH_FAIL("[communication] rendezvous timed out after ", format_seconds(timeout),
                  " waiting for key(s) ", missing, " in ", describe(),
                  " (has every rank started, with the same store and prefix?)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

std::vector<char> Store::get(const std::string& key) {
  wait({key});
  return read(full_key(key));
}

// Shares the parent's backend; only the key prefix differs.
class ChildStore : public Store {
 public:
  ChildStore(Store& parent, std::string prefix)
      : Store(std::move(prefix), parent.timeout()), parent_(parent) {}
  std::string describe() const override { return parent_.describe(); }

 protected:
  void write(const std::string& key, const std::vector<char>& data) override {
    parent_.write(key, data);
  }
  bool exists(const std::vector<std::string>& keys) override { return parent_.exists(keys); }
  std::vector<char> read(const std::string& key) override { return parent_.read(key); }

 private:
  Store& parent_;
};

std::unique_ptr<Store> Store::child(const std::string& prefix) {
  return std::make_unique<ChildStore>(*this, prefix_ + "/" + prefix);
}

namespace {

class FileStore : public Store {
 public:
  FileStore(std::string dir, const std::string& prefix, std::chrono::milliseconds timeout)
      : Store(prefix, timeout), dir_(std::move(dir)) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    ZENITH_CHECK(fs::is_directory(dir_), "[communication] file store: cannot create directory ",
                 dir_, ec ? ": " + ec.message() : "");
  }
  std::string describe() const override { return "file://" + dir_; }

 protected:
  void write(const std::string& key, const std::vector<char>& data) override {
    const auto path = path_of(key);
    // Write then rename, so a reader never sees half a value.
    const auto tmp = dir_ + "/.tmp." + std::to_string(getpid()) + "." + file_name(key);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      ZENITH_CHECK(out.good(), "[communication] file store: cannot write ", tmp);
      out.write(data.data(), std::streamsize(data.size()));
      ZENITH_CHECK(out.good(), "[communication] file store: cannot write ", tmp);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    ZENITH_CHECK(!ec, "[communication] file store: cannot rename ", tmp, ": ", ec.message());
  }
  bool exists(const std::vector<std::string>& keys) override {
    for (const auto& k : keys)
      if (access(path_of(k).c_str(), F_OK) != 0) return false;
    return true;
  }
  std::vector<char> read(const std::string& key) override {
    std::ifstream in(path_of(key), std::ios::binary);
    ZENITH_CHECK(in.good(), "[communication] file store: cannot read ", path_of(key));
    return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  // Keys are paths like "zenith/world/3"; one flat directory keeps cleanup simple.
  static std::string file_name(const std::string& key) {
    std::string s = key;
    for (auto& c : s)
      if (c == '/')
        c = '.';
      else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
        c = '_';
    return s;
  }
  std::string path_of(const std::string& key) const { return dir_ + "/" + file_name(key); }

  std::string dir_;
};

}  // namespace

std::unique_ptr<Store> make_file_store(const std::string& dir, const std::string& prefix,
                                       std::chrono::milliseconds timeout) {
  return std::make_unique<FileStore>(dir, prefix, timeout);
}

std::pair<std::string, int> split_host_port(const std::string& s, const std::string& what) {
  const auto colon = s.rfind(':');
  ZENITH_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < s.size(), "[communication] ",
               what, ": expected host:port, got '", s, "'");
  std::string host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    size_t used = 0;
    port = std::stoi(s.substr(colon + 1), &used);
    ZENITH_CHECK(used == s.size() - colon - 1, "");
  } catch (const std::exception&) {
    ZENITH_FAIL("[communication] ", what, ": bad port in '", s, "'");
  }
  ZENITH_CHECK(port > 0 && port < 65536, "[communication] ", what, ": port out of range in '", s,
               "'");
  return {host, port};
}

std::unique_ptr<Store> make_store(const std::string& url, const std::string& prefix, bool serve,
                                  std::chrono::milliseconds timeout) {
  auto starts = [&](const char* scheme) { return url.rfind(scheme, 0) == 0; };
  if (starts("file://")) {
    const auto dir = url.substr(7);
    ZENITH_CHECK(!dir.empty() && dir[0] == '/',
                 "[communication] file store needs an absolute path (file:///dir), got '", url,
                 "'");
    return make_file_store(dir, prefix, timeout);
  }
  if (starts("redis://")) {
    auto [host, port] = split_host_port(url.substr(8), "redis store");
    return make_redis_store(host, port, prefix, timeout);
  }
  if (starts("tcp://")) {
    auto [host, port] = split_host_port(url.substr(6), "tcp store");
    return make_tcp_store(host, port, serve, prefix, timeout);
  }
  ZENITH_FAIL("[communication] unknown store '", url,
              "' (expected file:///dir, redis://host:port or tcp://host:port)");
}

}  // namespace zenith::distributed
