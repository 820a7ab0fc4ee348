// The attack suite against a real `zenith server` (issue 13): each probe is sent as raw bytes or
// through the API client, and asserts the answer and the server's peak memory growth.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/processes.h"
#include "support/raw_http.h"
#include "support/run_zenith.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;
namespace zt = zenith::testing;
using nlohmann::json;
using zt::json_body;
using zt::RawConnection;
using zt::read_all;
using zt::ServerProcess;

namespace {

constexpr double kMaxGrowthMiB = 100;
// A 64 MiB body read whole grows the server by 64 MiB or more; bounded reading measured 8-17.
constexpr double kMaxBodyGrowthMiB = 32;

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

// `bytes` of zeros as one gzip member (deflate level 9): ~1000:1.
std::string gzip_zeros(std::size_t bytes) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  const std::string zeros(1 << 20, '\0');
  std::string out;
  char buf[1 << 16];
  std::size_t fed = 0;
  int flush = Z_NO_FLUSH;
  do {
    if (z.avail_in == 0 && fed < bytes) {
      const std::size_t n = std::min(zeros.size(), bytes - fed);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
      z.avail_in = uInt(n);
      fed += n;
    }
    flush = fed == bytes ? Z_FINISH : Z_NO_FLUSH;
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    deflate(&z, flush);
    out.append(buf, sizeof buf - z.avail_out);
  } while (!(flush == Z_FINISH && z.avail_out != 0));
  deflateEnd(&z);
  return out;
}

std::string post_head(const std::string& path, const std::string& token, const std::string& extra) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
         (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") +
         "Content-Type: application/json\r\n" + extra + "\r\n";
}

std::string error_of(const zt::RawReply& r) {
  try {
    return json::parse(r.body).value("error", "");
  } catch (...) {
    return "(not JSON) " + r.body.substr(0, 200);
  }
}

class PlatformAttacks : public ::testing::Test {
 protected:
  zt::TempDir dir_{"attacks"};
  void TearDown() override { zt::kill_all_with_env("ZENITH_JOB_DIR=" + dir_.str()); }
};

}  // namespace

// Only /healthz and the dashboard's shell answer without a token; every /api/v1 route and
// /metrics say 401 with a JSON error. A viewer token reads but cannot change anything (403).
TEST_F(PlatformAttacks, NoOpenRoutesAndViewersOnlyRead) {
  ServerProcess server(dir_.str());
  auto admin = server.client();
  const long long id = submit(admin, "job:\n  env: { API_KEY: s3cret }\n  entry: echo hi\n")["id"];
  wait_state(admin, id, "succeeded");
  auto anon = server.client("");
  const std::string job = "/api/v1/jobs/" + std::to_string(id);
  for (const std::string& path :
       {std::string("/api/v1/jobs"), job, job + "/logs", job + "/metrics",
        std::string("/api/v1/devices"), std::string("/api/v1/alerts"),
        std::string("/api/v1/services"), std::string("/api/v1/models"),
        std::string("/api/v1/tokens"), std::string("/api/v1/dashboard/jobs"),
        std::string("/api/v1/dashboard/cluster"), job + "/nope", std::string("/metrics")}) {
    auto r = anon.get(path);
    EXPECT_EQ(r.status, 401) << path << ": " << r.body;
    EXPECT_EQ(r.body.find("s3cret"), std::string::npos) << path;
    EXPECT_NO_THROW(json::parse(r.body)) << path << ": " << r.body;
  }
  EXPECT_EQ(anon.post(job + "/cancel", "{}").status, 401);
  EXPECT_EQ(anon.get("/healthz").status, 200);
  EXPECT_EQ(anon.get("/").status, 200);

  auto made = admin.post("/api/v1/tokens", json{{"role", "viewer"}}.dump());
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string viewer_secret = json_body(made)["secret"];
  auto viewer = server.client(viewer_secret);
  for (const std::string& path : {std::string("/api/v1/jobs"), job, job + "/logs",
                                  std::string("/metrics"), std::string("/api/v1/dashboard/jobs")})
    EXPECT_EQ(viewer.get(path).status, 200) << path;
  EXPECT_EQ(json_body(viewer.get("/api/v1/dashboard/session"))["role"], "viewer");
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/api/v1/jobs", json{{"yaml", "job:\n  entry: echo no\n"}}.dump()},
           {job + "/cancel", "{}"},
           {"/api/v1/tokens", json{{"role", "admin"}}.dump()},
           {"/api/v1/services", "{}"}}) {
    auto r = viewer.post(path, body);
    EXPECT_EQ(r.status, 403) << path << ": " << r.body;
    EXPECT_NE(error_of({403, "", r.body}).find("viewer"), std::string::npos) << r.body;
  }
  // Tokens are stored hashed: the secret is nowhere in the database file.
  EXPECT_EQ(read_all(dir_.str() + "/zenith.db").find(viewer_secret), std::string::npos);
  // A revoked viewer token stops working.
  const long long token_id = json_body(made)["id"];
  EXPECT_EQ(admin.post("/api/v1/tokens/" + std::to_string(token_id) + "/revoke", "{}").status, 200);
  EXPECT_EQ(viewer.get("/api/v1/jobs").status, 401);
}

// DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends "Host: evil.example".
TEST_F(PlatformAttacks, HostHeaderMustNameTheServer) {
  ServerProcess server(dir_.str());
  for (const std::string& host :
       {std::string("evil.example"), "evil.example:" + std::to_string(server.port())}) {
    RawConnection c(server.port());
    c.send("GET /api/v1/jobs HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " +
           server.token() + "\r\n\r\n");
    auto r = c.read_reply(10);
    EXPECT_EQ(r.status, 421) << host << ": " << r.head;
    EXPECT_NE(error_of(r).find("Host"), std::string::npos) << r.body;
  }
  for (const std::string& host : {std::string("127.0.0.1:") + std::to_string(server.port()),
                                  std::string("localhost:") + std::to_string(server.port())}) {
    RawConnection c(server.port());
    c.send("GET /api/v1/jobs HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " +
           server.token() + "\r\n\r\n");
    EXPECT_EQ(c.read_reply(10).status, 200) << host;
  }
}

// A job cannot read the server's token, database or other jobs' dirs, and does not get the
// server's environment; its own dir stays writable. A rank cannot raise its cgroup's limit.
TEST_F(PlatformAttacks, JobsCannotReachTheServersSecrets) {
  setenv("ZENITH_TEST_SERVER_SECRET", "server-env-secret", 1);
  ServerProcess server(dir_.str());
  unsetenv("ZENITH_TEST_SERVER_SECRET");
  auto c = server.client();
  // The server prints its isolation line just after it writes server.url.
  zt::wait_for(
      [&] { return read_all(dir_.str() + "/server.log").find("isolation:") != std::string::npos; },
      10);
  const std::string log = read_all(dir_.str() + "/server.log");
  const bool mount_ns = log.find("mount namespace: yes") != std::string::npos;
  const long long other = submit(c, "job:\n  entry: echo other-job-output\n")["id"];
  wait_state(c, other, "succeeded");
  // Reads the token, lists DATA, reads another job's log, greps every process's environment,
  // tries to raise its own memory cgroup's limit (v2 or v1).
  const std::string entry =
      "    cat $ZENITH_JOB_DIR/../../token\n"
      "    ls -a $ZENITH_JOB_DIR/../..\n"
      "    cat $ZENITH_JOB_DIR/../" +
      std::to_string(other) +
      "/logs/rank_0.log\n"
      "    cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c server-env-secret\n"
      "    env\n"
      "    echo mine > $ZENITH_JOB_DIR/work/out.txt\n"
      "    p=$(grep -E '(^0::|memory)' /proc/self/cgroup | head -1 | cut -d: -f3)\n"
      "    for f in /sys/fs/cgroup$p/memory.max /sys/fs/cgroup/memory$p/memory.limit_in_bytes; do\n"
      "      [ -e $f ] && echo 9999999999 > $f 2>/dev/null && echo RAISED $f\n"
      "    done\n"
      "    true\n";
  const long long id =
      submit(c, "job:\n  resources: { memory: 256Mi }\n  entry: |\n" + entry)["id"];
  ASSERT_EQ(wait_state(c, id, "succeeded")["state"], "succeeded");
  const std::string out = c.get("/api/v1/jobs/" + std::to_string(id) + "/logs").body;
  EXPECT_EQ(out.find("server-env-secret"), std::string::npos) << out;
  EXPECT_NE(out.find("ZENITH_JOB_ID=" + std::to_string(id)), std::string::npos) << out;
  EXPECT_NE(out.find("PATH="), std::string::npos) << out;
  EXPECT_EQ(read_all(dir_.str() + "/jobs/" + std::to_string(id) + "/work/out.txt"), "mine\n");
  // Without a mount namespace DATA cannot be hidden: a failure under CI, a loud skip elsewhere.
  if (!mount_ns && std::getenv("CI")) FAIL() << "CI is set and no mount namespace here: " << log;
  if (!mount_ns) {
    std::fprintf(stderr,
                 "\n*** SKIPPED the isolation checks of PlatformAttacks.JobsCannotReachTheServers"
                 "Secrets: no mount namespace here (with CI set, this fails)\n%s\n",
                 log.c_str());
    GTEST_SKIP() << "no mount namespace here: " << log;
  }
  EXPECT_EQ(out.find(server.token()), std::string::npos) << out;
  EXPECT_EQ(out.find("zenith.db"), std::string::npos) << out;
  EXPECT_EQ(out.find("other-job-output"), std::string::npos) << out;
  EXPECT_EQ(out.find("RAISED"), std::string::npos) << out;
}

// A job's bytes that are not UTF-8 reach its logs and alerts; every reply stays valid JSON.
TEST_F(PlatformAttacks, InvalidUtf8InLogsAndAlerts) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  const long long id = submit(c, "job:\n  entry: printf '\\251\\377\\n'; exit 3\n")["id"];
  ASSERT_EQ(wait_state(c, id, "failed")["state"], "failed");
  for (const char* path : {"/api/v1/alerts", "/api/v1/jobs", "/api/v1/dashboard/cluster"}) {
    auto r = c.get(path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_NO_THROW(json::parse(r.body)) << path;
  }
}

// CVE-2025-46728 / CVE-2025-53628 in Debian's cpp-httplib 0.11.4: bodies without a usable
// length were read whole into memory. Every transfer form is bounded now, before auth costs.
TEST_F(PlatformAttacks, BodiesAreBoundedInEveryTransferForm) {
  ServerProcess server(dir_.str());
  const int pid = server.pid();
  const std::size_t mib64 = 64u << 20;
  zt::RawReply r;
  double growth = zt::peak_rss_growth_mib(pid, [&] {
    RawConnection c(server.port());
    r = c.send_streamed(post_head("/api/v1/jobs", server.token(), "Transfer-Encoding: chunked\r\n"),
                        mib64, /*chunked=*/true);
  });
  EXPECT_EQ(r.status, 413) << r.head << error_of(r);
  EXPECT_LT(growth, kMaxBodyGrowthMiB) << "64 MiB chunked body";
  std::printf("[ probe    ] 64 MiB chunked body: HTTP %d, peak RSS growth %.1f MiB\n", r.status,
              growth);

  growth = zt::peak_rss_growth_mib(pid, [&] {
    RawConnection c(server.port());
    r = c.send_streamed(post_head("/api/v1/jobs", "", "Transfer-Encoding: chunked\r\n"), mib64,
                        true);
  });
  EXPECT_EQ(r.status, 401) << r.head;
  EXPECT_LT(growth, kMaxBodyGrowthMiB) << "64 MiB chunked body without a token";

  // No Content-Length and no chunking: the body would run until the connection closes.
  growth = zt::peak_rss_growth_mib(pid, [&] {
    RawConnection c(server.port());
    r = c.send_streamed(post_head("/api/v1/jobs", server.token(), ""), mib64, false);
  });
  EXPECT_EQ(r.status, 411) << r.head;
  EXPECT_LT(growth, kMaxBodyGrowthMiB) << "body without a length";

  // A declared length over the limit is refused before any of it is read.
  {
    RawConnection c(server.port());
    c.send(post_head("/api/v1/jobs", server.token(), "Content-Length: 100000000000\r\n"));
    r = c.read_reply(10);
    EXPECT_EQ(r.status, 413) << r.head;
  }

  // A gzip bomb: 1 MiB on the wire, 1 GiB inflated.
  const std::string bomb = gzip_zeros(std::size_t(1) << 30);
  growth = zt::peak_rss_growth_mib(pid, [&] {
    RawConnection c(server.port());
    c.send(post_head(
        "/api/v1/jobs", server.token(),
        "Content-Encoding: gzip\r\nContent-Length: " + std::to_string(bomb.size()) + "\r\n"));
    c.send(bomb);
    r = c.read_reply(60);
  });
  EXPECT_EQ(r.status, 415) << r.head << error_of(r);
  EXPECT_LT(growth, kMaxGrowthMiB) << "gzip bomb";
  std::printf("[ probe    ] gzip bomb (%zu bytes -> 1 GiB): HTTP %d, peak RSS growth %.1f MiB\n",
              bomb.size(), r.status, growth);
  {
    RawConnection c(server.port());
    c.send(
        post_head("/api/v1/jobs", server.token(), "Content-Encoding: br\r\nContent-Length: 4\r\n") +
        "abcd");
    EXPECT_EQ(c.read_reply(10).status, 415);
  }
  EXPECT_EQ(server.client().get("/api/v1/jobs").status, 200);  // still serving
}

// Request lines and header sections are bounded too (httplib reads a whole line before checking).
TEST_F(PlatformAttacks, HeadersAndRequestLinesAreBounded) {
  ServerProcess server(dir_.str());
  const int pid = server.pid();
  zt::RawReply r;
  double growth = zt::peak_rss_growth_mib(pid, [&] {
    RawConnection c(server.port());
    r = c.send_streamed("GET /", 64u << 20, false, 'x');
  });
  EXPECT_TRUE(r.status == 414 || (r.status == 0 && r.closed)) << r.head;
  EXPECT_LT(growth, kMaxGrowthMiB) << "64 MiB request line";
  growth = zt::peak_rss_growth_mib(pid, [&] {
    RawConnection c(server.port());
    r = c.send_streamed("GET /healthz HTTP/1.1\r\nX-Big: ", 64u << 20, false, 'x');
  });
  EXPECT_EQ(r.status, 431) << r.head;
  EXPECT_LT(growth, kMaxGrowthMiB) << "64 MiB header line";
  growth = zt::peak_rss_growth_mib(pid, [&] {
    RawConnection c(server.port());
    std::string many = "GET /healthz HTTP/1.1\r\n";
    c.send(many);
    const std::string line = "X-A: " + std::string(4000, 'y') + "\r\n";
    for (int i = 0; i < 16000 && c.send(line) && !c.reply_waiting();) ++i;
    r = c.read_reply(10);
  });
  EXPECT_EQ(r.status, 431) << r.head;
  EXPECT_LT(growth, kMaxGrowthMiB) << "16000 header lines";
  EXPECT_EQ(server.client().get("/api/v1/jobs").status, 200);
}

// 100k-deep JSON used to overflow the server's stack (recursive copy/dump of the spec).
TEST_F(PlatformAttacks, DeepJsonIsRefused) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& body :
       {"{\"job\": " + deep + "}", deep, "{\"yaml\": \"" + deep + "\"}"}) {
    auto r = c.post("/api/v1/jobs", body);
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
    EXPECT_NE(r.body.find("nested"), std::string::npos) << r.body.substr(0, 300);
  }
  EXPECT_EQ(c.post("/api/v1/services/x/rollback", "{\"a\": " + deep + "}").status, 400);
  EXPECT_EQ(c.get("/api/v1/jobs").status, 200);
}

// Followers of a job's log do not hold the API's workers: with 10 follow streams open, a cancel
// and the dashboard still answer at once.
TEST_F(PlatformAttacks, FollowStreamsDoNotFreezeTheApi) {
  ServerProcess server(dir_.str());
  auto c = server.client();
  const long long id =
      submit(c, "job:\n  entry: 'while true; do echo tick; sleep 0.2; done'\n")["id"];
  ASSERT_EQ(wait_state(c, id, "running")["state"], "running");
  std::atomic<int> streaming{0};
  std::vector<std::thread> followers;
  for (int i = 0; i < 10; ++i)
    followers.emplace_back([&] {
      auto f = server.client();
      bool counted = false;
      f.stream(
          "/api/v1/jobs/" + std::to_string(id) + "/logs?follow=1",
          [&](const char*, size_t) {
            if (!counted) streaming++, counted = true;
            return true;
          },
          60);
    });
  zt::wait_for([&] { return streaming.load() >= 10; }, 20);
  EXPECT_EQ(streaming.load(), 10);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(c.get("/api/v1/dashboard/cluster").status, 200);
  auto r = c.post("/api/v1/jobs/" + std::to_string(id) + "/cancel", "{}");
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json_body(r)["state"], "cancelled") << r.body;
  EXPECT_LT(took, 10);
  for (auto& t : followers) t.join();  // the streams end with the job
}

// One server per data dir: the second says which pid holds it and touches nothing.
TEST_F(PlatformAttacks, SecondServerOnOneDataDirIsRefused) {
  ServerProcess first(dir_.str());
  auto c = first.client();
  const long long id = submit(c, "job:\n  entry: sleep 300\n")["id"];
  ASSERT_EQ(wait_state(c, id, "running")["state"], "running");
  auto second = zt::run_zenith("server --port 0 --data " + dir_.str());
  EXPECT_NE(second.code, 0) << second.output;
  EXPECT_NE(second.output.find("pid " + std::to_string(first.pid())), std::string::npos)
      << second.output;
  EXPECT_EQ(json_body(c.get("/api/v1/jobs/" + std::to_string(id)))["state"], "running");
  EXPECT_NE(read_all(dir_.str() + "/server.url"), "");
}

// Retention: a finished job's metric series, device samples, alerts and logs go after
// --retention; the job's record stays.
TEST_F(PlatformAttacks, RetentionPrunesFinishedJobs) {
  ServerProcess server(dir_.str(), {"--retention", "2s"});
  auto c = server.client();
  const long long id = submit(c,
                              "job:\n  entry: |\n"
                              "    echo '{\"name\": \"loss\", \"value\": 1, \"step\": 1}' "
                              ">> $ZENITH_METRICS_FILE\n"
                              "    sleep 1.5\n"
                              "    exit 3\n")["id"];
  ASSERT_EQ(wait_state(c, id, "failed")["state"], "failed");
  const std::string job = std::to_string(id);
  ASSERT_FALSE(json_body(c.get("/api/v1/alerts?job=" + job)).empty());
  const std::string logs = dir_.str() + "/jobs/" + job + "/logs";
  EXPECT_TRUE(zt::wait_for(
      [&] {
        return !std::filesystem::exists(logs) &&
               json_body(c.get("/api/v1/alerts?job=" + job)).empty() &&
               json_body(c.get("/api/v1/dashboard/jobs/" + job + "/series"))["series"].empty();
      },
      20))
      << read_all(dir_.str() + "/server.log");
  EXPECT_EQ(json_body(c.get("/api/v1/jobs/" + job))["state"], "failed");
}
