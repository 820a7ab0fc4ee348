// Alert delivery beyond the store: an optional webhook that receives each alert as a JSON
// POST. Sends happen on a worker thread so a slow receiver never stalls the scheduler.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "platform/jobs/job.h"

namespace zenith::platform {

class WebhookSender {
 public:
  // `url` like http://127.0.0.1:9000/hook (https works too); empty = disabled.
  explicit WebhookSender(std::string url);
  ~WebhookSender();  // delivers what is queued (bounded wait), then joins
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  void send(const Alert& alert, const std::string& job_name);

 private:
  void loop();
  std::string url_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool stop_ = false;
  std::thread worker_;
};

// Splits "http://host:port/path" into scheme://host:port and /path; false when malformed.
bool split_url(const std::string& url, std::string* origin, std::string* path);

}  // namespace zenith::platform
