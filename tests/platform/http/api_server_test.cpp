// `zenith server` as a real process: REST API, token, errors, logs, cancel, restart recovery.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "platform/http/api_client.h"
#include "support/files.h"
#include "support/processes.h"
#include "support/run_zenith.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;
namespace zt = zenith::testing;
using nlohmann::json;
using zt::json_body;
using zt::read_all;
using zt::ServerProcess;

namespace {

json submit(zp::ApiClient& c, const std::string& yaml) {
  auto r = c.post("/api/v1/jobs", json{{"yaml", yaml}, {"source", "job.yaml"}}.dump());
  EXPECT_EQ(r.status, 201) << r.body;
  return json_body(r);
}

json wait_state(zp::ApiClient& c, long long id, const std::string& state, double timeout_s = 30) {
  json job;
  zt::wait_for(
      [&] {
        job = json_body(c.get("/api/v1/jobs/" + std::to_string(id)));
        return job.is_object() && job["state"] == state;
      },
      timeout_s);
  return job;
}

class PlatformServerTest : public ::testing::Test {
 protected:
  zt::TempDir dir_{"server"};
  void TearDown() override { zt::kill_all_with_env("ZENITH_JOB_DIR=" + dir_.str()); }
};

// The seed's job with a memory request this host can hold (its 64Gi is refused on smaller hosts).
const char* kSeedPrintsRankVars = R"(job:
  name: cifar10-training
  framework: mindspore
  resources: { npu: 8, memory: 1Gi, storage: 1Gi }
  entry: echo "RANK_ID=$RANK_ID DEVICE_ID=$DEVICE_ID RANK_SIZE=$RANK_SIZE RANK_TABLE_FILE=$RANK_TABLE_FILE"
)";

}  // namespace

// SIGTERM (and SIGINT) stop the server through its handler: a clean exit with a message, not
// the default action (which a thread started by a library before main() used to take).
TEST_F(PlatformServerTest, SigtermAndSigintStopGracefully) {
  for (int sig : {SIGTERM, SIGINT}) {
    ServerProcess server(dir_.str());
    ASSERT_EQ(server.client().get("/api/v1/jobs").status, 200);
    const int status = server.stop(sig);
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << sig << " killed the server (status " << status
                                   << "): " << read_all(dir_.str() + "/server.log");
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_NE(read_all(dir_.str() + "/server.log")
                  .find("[server] signal " + std::to_string(sig) + ": stopping"),
              std::string::npos);
  }
}

TEST_F(PlatformServerTest, SubmitListGetLogsAndMetrics) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  struct stat st;
  ASSERT_EQ(stat((dir_.str() + "/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  json job = submit(c, kSeedPrintsRankVars);
  const long long id = job["id"];
  job = wait_state(c, id, "succeeded");
  ASSERT_EQ(job["state"], "succeeded") << job.dump(2);
  ASSERT_EQ(job["ranks"].size(), 8u);

  auto list = json_body(c.get("/api/v1/jobs?state=succeeded"));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["id"], id);
  EXPECT_TRUE(json_body(c.get("/api/v1/jobs?state=running")).empty());
  EXPECT_EQ(c.get("/api/v1/jobs?state=bogus").status, 400);

  for (int rank : {0, 5}) {
    auto r = c.get("/api/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank));
    ASSERT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("[INFO] Rank " + std::to_string(rank) + " started (pid "),
              std::string::npos);
    EXPECT_NE(r.body.find("RANK_ID=" + std::to_string(rank) + " DEVICE_ID=" + std::to_string(rank) +
                          " RANK_SIZE=8"),
              std::string::npos)
        << r.body;
  }
  EXPECT_EQ(c.get("/api/v1/jobs/" + std::to_string(id) + "/logs?rank=8").status, 404);
  auto table =
      json::parse(read_all(dir_.str() + "/jobs/" + std::to_string(id) + "/rank_table.json"));
  EXPECT_EQ(table["server_list"][0]["device"].size(), 8u);

  auto metrics = c.get("/metrics");
  EXPECT_NE(metrics.body.find("zenith_jobs{state=\"succeeded\"} 1"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("zenith_devices{kind=\"cpu\"} 8"), std::string::npos);
  auto devices = json_body(c.get("/api/v1/devices"));
  EXPECT_EQ(devices.size(), 8u);
}

TEST_F(PlatformServerTest, FollowStreamsLogsUntilTheJobEnds) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  json job = submit(c, "job:\n  entry: for i in 1 2 3; do echo line $i; sleep 0.3; done\n");
  std::string streamed;
  auto r = c.stream(
      "/api/v1/jobs/" + std::to_string(job["id"].get<long long>()) + "/logs?follow=1",
      [&](const char* d, size_t n) {
        streamed.append(d, n);
        return true;
      },
      /*idle_timeout_s=*/30);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(streamed.find("line 3"), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("[INFO] Job succeeded"), std::string::npos) << streamed;
}

TEST_F(PlatformServerTest, BadRequestsGetClearErrorsAndTheServerKeepsServing) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  auto anon = server.client("");

  auto r = anon.post("/api/v1/jobs", json{{"yaml", kSeedPrintsRankVars}}.dump());
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(json_body(r)["error"].get<std::string>().find("Bearer"), std::string::npos);
  EXPECT_EQ(zp::ApiClient(server.url(), "wrong").post("/api/v1/jobs", "{}").status, 401);

  r = c.post("/api/v1/jobs", "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(json_body(r)["error"].get<std::string>().find("[api] malformed JSON body"),
            std::string::npos);
  EXPECT_EQ(c.post("/api/v1/jobs", "[1,2]").status, 400);
  EXPECT_EQ(c.post("/api/v1/jobs", "{\"spec\": 1}").status, 400);

  r = c.post("/api/v1/jobs",
             json{{"yaml", "job:\n  resources: { npu: 8, memory: 64Gx }\n  entyr: x\n"},
                  {"source", "job.yaml"}}
                 .dump());
  EXPECT_EQ(r.status, 400);
  std::string err = json_body(r)["error"];
  EXPECT_NE(err.find("[job_spec] job.yaml:2:32: bad quantity '64Gx'"), std::string::npos) << err;
  EXPECT_NE(err.find("job.yaml:3:3: unknown key 'entyr' in job (did you mean 'entry'?)"),
            std::string::npos)
      << err;
  EXPECT_EQ(json_body(r)["issues"].size(), 3u);

  r = c.post("/api/v1/jobs", json{{"yaml", "job:\n  resources: { npu: 64 }\n  entry: x\n"}}.dump());
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(json_body(r)["error"].get<std::string>().find("64 cpu devices but this host has 8"),
            std::string::npos);
  // Memory and storage are checked against the host like devices, with the numbers.
  r = c.post("/api/v1/jobs",
             json{{"yaml", "job:\n  resources: { npu: 1, memory: 64Ti }\n  entry: x\n"}}.dump());
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(json_body(r)["error"].get<std::string>().find(
                "rejected: the job asks for memory 64Ti but this host has "),
            std::string::npos)
      << r.body;
  r = c.post("/api/v1/jobs",
             json{{"yaml", "job:\n  resources: { npu: 1, storage: 900Pi }\n  entry: x\n"}}.dump());
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(json_body(r)["error"].get<std::string>().find("asks for storage 900Pi"),
            std::string::npos)
      << r.body;

  // The spec as JSON goes through the same validation.
  r = c.post("/api/v1/jobs",
             json{{"job", {{"entry", "true"}, {"resources", {{"npu", 2}}}}}}.dump());
  EXPECT_EQ(r.status, 201) << r.body;

  EXPECT_EQ(c.get("/api/v1/jobs/424242").status, 404);
  EXPECT_EQ(c.get("/api/v1/jobs/abc").status, 404);
  EXPECT_EQ(c.post("/api/v1/jobs/424242/cancel", "{}").status, 404);
  EXPECT_EQ(c.get("/api/v1/jobs/424242/logs").status, 404);
  EXPECT_EQ(c.get("/api/v1/nope").status, 404);
  EXPECT_EQ(c.get("/api/v1/jobs").status, 200);  // still serving
}

TEST_F(PlatformServerTest, FailureRaisesAlertsVisibleThroughTheApi) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  json job = submit(c, "job:\n  resources: { npu: 2 }\n  entry: 'echo bad input; exit 4'\n");
  const long long id = job["id"];
  job = wait_state(c, id, "failed");
  ASSERT_EQ(job["state"], "failed");
  EXPECT_EQ(job["exit_code"], 4);
  ASSERT_FALSE(job["alerts"].empty());
  EXPECT_EQ(job["alerts"][0]["kind"], "abnormal_exit");
  EXPECT_NE(job["alerts"][0]["message"].get<std::string>().find("bad input"), std::string::npos);
  auto alerts = json_body(c.get("/api/v1/alerts"));
  EXPECT_GE(alerts.size(), 1u);
}

// A failing job whose output is not UTF-8 (one byte 0xA9, as Latin-1's "©"): its alert quotes
// the log, and every reply that carries it stays 200 with valid JSON (U+FFFD in place of the
// byte), for the API, the dashboard and the CLI. It used to be 500 from then on (nlohmann::json
// throws type_error.316 on dumping invalid UTF-8).
TEST_F(PlatformServerTest, OutputThatIsNotUtf8KeepsTheApiAndTheCliAnswering) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  json job = submit(c, "job:\n  name: latin1\n  entry: printf 'caf\\251 failed\\n'; exit 3\n");
  const long long id = job["id"];
  job = wait_state(c, id, "failed");
  ASSERT_EQ(job["state"], "failed") << job.dump();
  const std::string replaced = "caf\xEF\xBF\xBD failed";  // U+FFFD for the byte
  const std::string job_path = "/api/v1/jobs/" + std::to_string(id);
  for (const std::string& path :
       {std::string("/api/v1/alerts"), std::string("/api/v1/jobs"), job_path,
        "/api/v1/dashboard/jobs/" + std::to_string(id) + "/logs",
        std::string("/api/v1/dashboard/cluster")}) {
    auto r = c.get(path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_NO_THROW(json::parse(r.body)) << path << ": " << r.body;
  }
  json alerts = json_body(c.get("/api/v1/alerts"));
  ASSERT_FALSE(alerts.empty());
  EXPECT_NE(alerts[0]["message"].get<std::string>().find(replaced), std::string::npos)
      << alerts.dump();
  const std::string where = " --server " + server.url() + " --token " + server.token();
  auto jobs = zt::run_zenith("jobs" + where);
  EXPECT_EQ(jobs.code, 0) << jobs.output;
  EXPECT_NE(jobs.output.find("latin1"), std::string::npos) << jobs.output;
  auto one = zt::run_zenith("job " + std::to_string(id) + where);
  EXPECT_EQ(one.code, 0) << one.output;
  EXPECT_NE(one.output.find(replaced), std::string::npos) << one.output;
}

TEST_F(PlatformServerTest, CancelLeavesNoProcess) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  json job = submit(c, "job:\n  resources: { npu: 2 }\n  entry: 'sleep 300 & sleep 300'\n");
  const long long id = job["id"];
  const std::string needle = "ZENITH_JOB_DIR=" + dir_.str() + "/jobs/" + std::to_string(id) + "\n";
  ASSERT_TRUE(zt::wait_for([&] { return zt::processes_with_env(needle).size() >= 4; }, 15));
  auto r = c.post("/api/v1/jobs/" + std::to_string(id) + "/cancel", "{}");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json_body(r)["state"], "cancelled") << r.body;
  EXPECT_TRUE(zt::wait_for([&] { return zt::processes_with_env(needle).empty(); }, 3));
  // Devices are free again.
  EXPECT_TRUE(zt::wait_for(
      [&] {
        for (const auto& d : json_body(c.get("/api/v1/devices")))
          if (d["job_id"] != 0) return false;
        return true;
      },
      5));
}

TEST_F(PlatformServerTest, KilledServerRestartsAndRecoversEveryJob) {
  long long done_id = 0, running_id = 0, queued_id = 0;
  const std::string long_yaml =
      "job:\n  resources: { npu: 8 }\n  entry: 'echo started; sleep 300'\n";
  {
    ServerProcess server(dir_.str());
    auto c = server.client();
    done_id = submit(c, "job:\n  entry: echo quick\n")["id"];
    wait_state(c, done_id, "succeeded");
    running_id = submit(c, long_yaml)["id"];
    ASSERT_EQ(wait_state(c, running_id, "running")["state"], "running");
    queued_id = submit(c, "job:\n  entry: echo later\n")["id"];  // waits: all 8 devices busy
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_EQ(json_body(c.get("/api/v1/jobs/" + std::to_string(queued_id)))["state"], "pending");
    server.stop(SIGKILL);  // a crash: no chance to clean up
  }
  const std::string needle =
      "ZENITH_JOB_DIR=" + dir_.str() + "/jobs/" + std::to_string(running_id) + "\n";
  EXPECT_FALSE(zt::processes_with_env(needle).empty()) << "ranks should outlive the server";
  ServerProcess server(dir_.str());
  auto c = server.client();
  auto jobs = json_body(c.get("/api/v1/jobs"));
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0]["state"], "succeeded");
  EXPECT_EQ(jobs[1]["state"], "running");  // re-attached
  EXPECT_EQ(jobs[2]["state"], "pending");
  auto devices = json_body(c.get("/api/v1/devices"));
  EXPECT_EQ(devices[0]["job_id"], running_id);
  auto r = c.post("/api/v1/jobs/" + std::to_string(running_id) + "/cancel", "{}");
  EXPECT_EQ(json_body(r)["state"], "cancelled") << r.body;
  EXPECT_TRUE(zt::wait_for([&] { return zt::processes_with_env(needle).empty(); }, 3));
  // Its devices went to the queued job.
  EXPECT_EQ(wait_state(c, queued_id, "succeeded")["state"], "succeeded");
}

TEST_F(PlatformServerTest, RanksThatEndWhileTheServerIsDownAreAccountedFor) {
  long long ok_id = 0, bad_id = 0;
  {
    ServerProcess server(dir_.str());
    auto c = server.client();
    ok_id = submit(c, "job:\n  entry: sleep 1; echo fine\n")["id"];
    bad_id = submit(c, "job:\n  entry: sleep 1; exit 9\n")["id"];
    wait_state(c, ok_id, "running");
    wait_state(c, bad_id, "running");
    server.stop(SIGKILL);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ServerProcess server(dir_.str());
  auto c = server.client();
  EXPECT_EQ(wait_state(c, ok_id, "succeeded")["state"], "succeeded");
  json bad = wait_state(c, bad_id, "failed");
  EXPECT_EQ(bad["state"], "failed");
  EXPECT_EQ(bad["exit_code"], 9);
}

namespace {

// A one-shot HTTP receiver on 127.0.0.1: accepts one request, answers 200, keeps the request.
class WebhookReceiver {
 public:
  WebhookReceiver() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 4);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      timeval tv{20, 0};
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[8192];
      std::string req;
      // Read headers, then Content-Length bytes of body.
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, n);
      }
      auto cl = req.find("Content-Length: ");
      size_t want = cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16));
      size_t have = req.size() - (req.find("\r\n\r\n") + 4);
      while (have < want) {
        ssize_t n = recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, n);
        have += n;
      }
      const char* ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      send(c, ok, strlen(ok), 0);
      close(c);
      std::lock_guard lock(mutex_);
      request_ = req;
    });
  }
  ~WebhookReceiver() {
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::string request() {
    std::lock_guard lock(mutex_);
    return request_;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::string request_;
};

}  // namespace

TEST_F(PlatformServerTest, AlertsArePostedToTheWebhook) {
  WebhookReceiver hook;
  ServerProcess server(dir_.str(), {"--webhook", hook.url()});
  auto c = server.client();
  json job = submit(c, "job:\n  entry: 'echo about to fail; exit 2'\n");
  ASSERT_TRUE(zt::wait_for([&] { return !hook.request().empty(); }, 15));
  std::string req = hook.request();
  EXPECT_EQ(req.rfind("POST /hook HTTP/1.1", 0), 0u) << req;
  json body = json::parse(req.substr(req.find("\r\n\r\n") + 4));
  EXPECT_EQ(body["kind"], "abnormal_exit");
  EXPECT_EQ(body["job_id"], job["id"]);
  EXPECT_NE(body["message"].get<std::string>().find("about to fail"), std::string::npos);
  auto metrics =
      json_body(c.get("/api/v1/jobs/" + std::to_string(job["id"].get<long long>()) + "/metrics"));
  EXPECT_EQ(metrics["state"], "failed");
}
