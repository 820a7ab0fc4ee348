#include "platform/jobs/alerts.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "platform/http/reply.h"

namespace zenith::platform {

bool split_url(const std::string& url, std::string* origin, std::string* path) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return false;
  std::string s = url.substr(0, scheme);
  if (s != "http" && s != "https") return false;
  auto slash = url.find('/', scheme + 3);
  *origin = url.substr(0, slash);
  *path = slash == std::string::npos ? "/" : url.substr(slash);
  return origin->size() > scheme + 3;
}

WebhookSender::WebhookSender(std::string url) : url_(std::move(url)) {
  if (!url_.empty()) worker_ = std::thread([this] { loop(); });
}

WebhookSender::~WebhookSender() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void WebhookSender::send(const Alert& alert, const std::string& job_name) {
  if (url_.empty()) return;
  nlohmann::json body = alert_to_json(alert);
  body["job_name"] = job_name;
  body["source"] = "zenith";
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(json_text(body));
  }
  cv_.notify_one();
}

void WebhookSender::loop() {
  std::string origin, path;
  if (!split_url(url_, &origin, &path)) {
    fprintf(stderr,
            "[alerts] webhook URL '%s' is not http(s)://host[:port]/path; alerts are not sent\n",
            url_.c_str());
  }
  for (;;) {
    std::string body;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      body = std::move(queue_.front());
      queue_.pop_front();
    }
    if (origin.empty()) continue;
    httplib::Client client(origin);
    client.set_connection_timeout(3);
    client.set_read_timeout(5);
    client.set_write_timeout(5);
    auto res = client.Post(path, body, "application/json");
    if (!res || res->status >= 300)
      fprintf(stderr, "[alerts] webhook %s failed: %s\n", url_.c_str(),
              res ? std::to_string(res->status).c_str() : httplib::to_string(res.error()).c_str());
  }
}

}  // namespace zenith::platform
