// Redis rendezvous store on hiredis. Gloo ships a RedisStore too, but it fails hard on keys left
// over from an earlier run (SETNX) and ignores our timeout in get(); this one overwrites, expires
// keys after a day and waits with the job's timeout.
#include <hiredis/hiredis.h>

#include <mutex>
#include <thread>

#include "distributed/store.h"
#include "distributed/util.h"
#include "zenith/error.h"

namespace zenith::distributed {

namespace {

struct RedisFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

constexpr const char* kKeyTtlSeconds = "86400";

class RedisStore : public Store {
 public:
  RedisStore(std::string host, int port, const std::string& prefix,
             std::chrono::milliseconds timeout)
      : Store(prefix, timeout), host_(std::move(host)), port_(port) {
    // The server may come up a moment after the ranks; retry within the timeout.
    const auto start = Clock::now();
    std::string last_error;
    for (;;) {
      timeval tv{2, 0};
      redis_.reset(redisConnectWithTimeout(host_.c_str(), port_, tv));
      if (redis_ && redis_->err == 0) break;
      last_error = redis_ ? redis_->errstr : "out of memory";
      ZENITH_CHECK(Clock::now() - start < timeout,
                   "[communication] redis store: cannot connect to ", host_, ":", port_, " within ",
                   format_seconds(timeout), ": ", last_error);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    timeval command_timeout{10, 0};
    redisSetTimeout(redis_.get(), command_timeout);
  }

  std::string describe() const override { return "redis://" + host_ + ":" + std::to_string(port_); }

 protected:
  void write(const std::string& key, const std::vector<char>& data) override {
    command({"SET", key, std::string(data.begin(), data.end()), "EX", kKeyTtlSeconds});
  }
  bool exists(const std::vector<std::string>& keys) override {
    std::vector<std::string> args{"EXISTS"};
    args.insert(args.end(), keys.begin(), keys.end());
    auto reply = command(args);
    return reply->type == REDIS_REPLY_INTEGER && size_t(reply->integer) == keys.size();
  }
  std::vector<char> read(const std::string& key) override {
    auto reply = command({"GET", key});
    ZENITH_CHECK(reply->type == REDIS_REPLY_STRING, "[communication] redis store: key ", key,
                 " vanished from ", describe());
    return std::vector<char>(reply->str, reply->str + reply->len);
  }

 private:
  ReplyPtr command(const std::vector<std::string>& args) {
    std::lock_guard<std::mutex> lock(mutex_);  // a hiredis context is not thread-safe
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    ReplyPtr reply(static_cast<redisReply*>(
        redisCommandArgv(redis_.get(), int(argv.size()), argv.data(), lens.data())));
    ZENITH_CHECK(reply != nullptr, "[communication] redis store ", describe(), ": ", args[0],
                 " failed: ", redis_->errstr);
    ZENITH_CHECK(reply->type != REDIS_REPLY_ERROR, "[communication] redis store ", describe(), ": ",
                 args[0], " failed: ", std::string(reply->str, reply->len));
    return reply;
  }

  std::string host_;
  int port_;
  std::mutex mutex_;
  std::unique_ptr<redisContext, RedisFree> redis_;
};

}  // namespace

std::unique_ptr<Store> make_redis_store(const std::string& host, int port,
                                        const std::string& prefix,
                                        std::chrono::milliseconds timeout) {
  return std::make_unique<RedisStore>(host, port, prefix, timeout);
}

}  // namespace zenith::distributed
