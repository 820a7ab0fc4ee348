// Restarts back off on a real `zenith server` (issue 13): a job whose rank keeps failing and a
// deployed service that keeps crashing are restarted after growing waits (exponential, capped);
// the service's crash count resets once it has stayed up for the healthy period. The server
// runs with short waits (--restart-delay 0.5s --max-restart-delay 2s --healthy-after 3s) so the
// whole sequence takes seconds: 0.5, 1, 2, 2, 2 where uncapped it would be 4 and 8.
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "serve/serve_test_util.h"
#include "support/files.h"
#include "support/processes.h"
#include "support/run_zenith.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace zt = zenith::testing;
using nlohmann::json;
using zt::json_body;
using zt::ServerProcess;

namespace {

constexpr double kBase = 0.5, kCap = 2, kHealthy = 3;
// What a restart may take beyond its wait: the tick it falls due in (0.2 s) and starting the
// process again, on a loaded host. Less than the next uncapped wait minus the cap (4 - 2).
constexpr double kSlack = 1.5;

std::vector<std::string> backoff_args() {
  return {"--restart-delay", "0.5s", "--max-restart-delay", "2s", "--healthy-after", "3s"};
}

double expected_delay(int restart) { return std::min(kCap, kBase * double(1 << (restart - 1))); }

// Seconds since boot, the clock /proc/PID/stat's start time counts in.
double boot_seconds() {
  timespec t{};
  clock_gettime(CLOCK_BOOTTIME, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// When process `pid` was started, in boot_seconds() (10 ms resolution).
double process_start(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  for (int i = 3; i <= 22; ++i) rest >> field;  // field 22: starttime in clock ticks
  return std::stod(field) / double(sysconf(_SC_CLK_TCK));
}

// A log line's stamp ("2026-05-01T12:00:00.123Z") as seconds since the epoch.
double utc_seconds(const std::string& stamp) {
  std::tm tm{};
  if (!strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
  const auto dot = stamp.find('.');
  return double(timegm(&tm)) +
         (dot == std::string::npos ? 0 : std::stod("0" + stamp.substr(dot, 4)));
}

class RestartBackoff : public ::testing::Test {
 protected:
  void TearDown() override { zt::kill_all_with_env("ZENITH_JOB_DIR=" + dir_.str()); }
  zt::TempDir dir_{"restart_backoff"};
};

}  // namespace

// A rank that always exits 3, max_restarts 5: six attempts, each started 0.5, 1, 2, 2, 2 s (plus
// the time to launch it) after the server decided to restart, as the log's timestamps show.
TEST_F(RestartBackoff, FailingJobRestartsAfterGrowingCappedWaits) {
  ServerProcess server(dir_.str(), backoff_args());
  auto c = server.client();
  auto made = c.post("/api/v1/jobs", json{{"yaml",
                                           "job:\n  name: crashloop\n  max_restarts: 5\n"
                                           "  entry: echo START $(date +%s.%N); exit 3\n"}}
                                         .dump());
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string job = "/api/v1/jobs/" + std::to_string(json_body(made)["id"].get<int>());
  json state;
  zt::wait_for(
      [&] {
        state = json_body(c.get(job));
        return state["state"] == "failed";
      },
      60);
  ASSERT_EQ(state["state"], "failed") << state.dump();
  EXPECT_EQ(state["restart_count"], 5) << state.dump();
  EXPECT_EQ(state["exit_code"], 3) << state.dump();

  // Each gap runs from the event that starts the wait, the server's "restart k of 5 in W" line
  // (stamped when it decided), to the next attempt's START: how long the server took to notice
  // the exit, which a loaded host stretches, is not part of it.
  const std::string log = c.get(job + "/logs").body;
  std::vector<double> starts, decided;
  std::vector<std::string> waits;
  std::istringstream lines(log);
  const std::regex start_line(R"(START (\d+\.\d+))"),
      restart_line(R"(^(\S+) .*restart \d of 5 in (\S+))");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, start_line)) starts.push_back(std::stod(m[1]));
    if (std::regex_search(line, m, restart_line)) {
      decided.push_back(utc_seconds(m[1]));
      waits.push_back(m[2]);
    }
  }
  ASSERT_EQ(starts.size(), 6u) << log;
  ASSERT_EQ(decided.size(), 5u) << log;
  EXPECT_EQ(waits, (std::vector<std::string>{"0.5s", "1s", "2s", "2s", "2s"})) << log;
  std::string gaps;
  for (int k = 1; k <= 5; ++k) {
    const double gap = starts[k] - decided[k - 1], delay = expected_delay(k);
    gaps += " " + std::to_string(gap);
    // The decision's stamp has 1 ms steps, truncated.
    EXPECT_GE(gap, delay - 0.001) << "restart " << k << " came before its wait";
    EXPECT_LT(gap, delay + kSlack) << "restart " << k << " (the cap is " << kCap << " s)";
  }
  std::printf("job restart gaps (s):%s\n", gaps.c_str());
}

// A deployed service killed (SIGKILL) as soon as it is up again: each new process is spawned
// 0.5, 1, 2, 2 s after the server decided to restart it (its stamped log line) and the server
// counts the crashes in a row. Once it has run for the healthy period, the next crash counts as the
// first (0.5 s again); five quick crashes in a row mark it failed.
TEST_F(RestartBackoff, CrashingServiceBacksOffAndAHealthyRunResetsTheCount) {
  const std::string w = dir_.str(), data = w + "/srv";
  const std::string ckpt = zenith::serve::test::write_seedcnn_checkpoint(w);
  ServerProcess server(data, backoff_args());
  auto c = server.client();
  auto deployed = zt::run_zenith("deploy --model " + ckpt + " --name crashy --server " +
                                 server.url() + " --data " + data);
  ASSERT_EQ(deployed.code, 0) << deployed.output;

  // The service once it runs a process other than `old_pid`.
  auto running_again = [&](int old_pid) {
    json s;
    zt::wait_for(
        [&] {
          s = json_body(c.get("/api/v1/services/crashy"));
          return s["state"] == "running" && s["pid"].get<int>() != old_pid;
        },
        30);
    return s;
  };
  // The server's decisions to restart the service, in Unix seconds, from its log line
  // "[services] crashy exited (k in a row) at T; restarting in W".
  auto decisions = [&] {
    std::vector<double> at;
    std::istringstream lines(zt::read_all(data + "/server.log"));
    const std::regex decided(R"(\[services\] crashy exited \(\d+ in a row\) at (\d+\.\d+))");
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_search(line, m, decided)) at.push_back(std::stod(m[1]));
    }
    return at;
  };
  // Kills the service's process; how long after the server decided to restart it its next
  // process was spawned (how long the server took to notice the exit, which a loaded host
  // stretches, is not part of it), and the service then.
  auto crash = [&](json& service) {
    const int pid = service["pid"];
    const size_t before = decisions().size();
    kill(pid, SIGKILL);
    service = running_again(pid);
    if (service["state"] != "running") return -1.0;
    const std::vector<double> decided = decisions();
    EXPECT_EQ(decided.size(), before + 1) << "one restart decision logged per crash";
    if (decided.size() != before + 1) return -1.0;
    // /proc's start time counts from boot; the log's stamp from the epoch.
    const double epoch_minus_boot =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
        boot_seconds();
    return process_start(service["pid"].get<int>()) + epoch_minus_boot - decided.back();
  };

  json s = running_again(0);
  ASSERT_EQ(s["state"], "running") << s.dump();
  EXPECT_EQ(s["crashes"], 0);
  std::string gaps;
  for (int k = 1; k <= 4; ++k) {
    const double gap = crash(s), delay = expected_delay(k);
    ASSERT_EQ(s["state"], "running") << "restart " << k << ": " << s.dump();
    gaps += " " + std::to_string(gap);
    EXPECT_EQ(s["crashes"], k) << s.dump();
    // /proc's start times have 10 ms steps, truncated; the clocks are compared once per crash.
    EXPECT_GE(gap, delay - 0.02) << "restart " << k << " came before its wait";
    EXPECT_LT(gap, delay + kSlack) << "restart " << k << " (the cap is " << kCap << " s)";
  }
  std::printf("service restart gaps (s):%s\n", gaps.c_str());

  // Up for the healthy period: the next crash is the first in a row, restarted after 0.5 s.
  std::this_thread::sleep_for(std::chrono::duration<double>(kHealthy + 0.5));
  const double reset_gap = crash(s);
  ASSERT_EQ(s["state"], "running") << s.dump();
  EXPECT_EQ(s["crashes"], 1) << s.dump();
  EXPECT_GE(reset_gap, kBase - 0.02);
  EXPECT_LT(reset_gap, kBase + kSlack);
  std::printf("service restart gap after a healthy run (s): %f\n", reset_gap);

  // Four more quick crashes (2..5 in a row): the fifth marks it failed with its last output.
  for (int k = 2; k <= 4; ++k) {
    crash(s);
    ASSERT_EQ(s["crashes"], k) << s.dump();
  }
  kill(s["pid"].get<int>(), SIGKILL);
  zt::wait_for(
      [&] {
        s = json_body(c.get("/api/v1/services/crashy"));
        return s["state"] == "failed";
      },
      10);
  EXPECT_EQ(s["state"], "failed") << s.dump();
  EXPECT_NE(s["reason"].get<std::string>().find("exited 5 times in a row"), std::string::npos)
      << s.dump();
}

// While a crashed service comes up again (slowly here: `zenith serve` behind a wrapper that
// first sleeps 4 s), the API answers about services at once: the slow start runs without the
// services' lock.
TEST_F(RestartBackoff, ApiAnswersWhileAServiceRestarts) {
  const std::string w = dir_.str(), data = w + "/srv", wrapper = w + "/slow-serve.sh";
  const std::string ckpt = zenith::serve::test::write_seedcnn_checkpoint(w);
  {
    std::ofstream out(wrapper);
    out << "#!/bin/sh\n[ -e " << w << "/slow ] && sleep 4\nexec " << ZENITH_BINARY << " \"$@\"\n";
  }
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  setenv("ZENITH_SERVE_BINARY", wrapper.c_str(), 1);
  ServerProcess server(data, backoff_args());
  unsetenv("ZENITH_SERVE_BINARY");
  auto c = server.client();
  auto deployed = zt::run_zenith("deploy --model " + ckpt + " --name slow --server " +
                                 server.url() + " --data " + data);
  ASSERT_EQ(deployed.code, 0) << deployed.output;
  json s = json_body(c.get("/api/v1/services/slow"));
  ASSERT_EQ(s["state"], "running") << s.dump();
  const int old_pid = s["pid"];

  std::ofstream(w + "/slow").put('1');
  kill(old_pid, SIGKILL);
  // The restart has begun: a new process, not up yet.
  ASSERT_TRUE(zt::wait_for(
      [&] {
        s = json_body(c.get("/api/v1/services/slow"));
        return s["state"] == "starting" && s["pid"].get<int>() > 0 && s["pid"] != old_pid;
      },
      10))
      << s.dump();
  double slowest = 0;
  for (int i = 0; i < 5; ++i) {
    for (const std::string path : {"/api/v1/services", "/api/v1/services/slow"}) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = c.get(path);
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(r.status, 200) << path << ": " << r.body;
      slowest = std::max(slowest, took);
    }
  }
  EXPECT_LT(slowest, 1.0) << "GET /api/v1/services waited for the restart";
  EXPECT_EQ(json_body(c.get("/api/v1/services/slow"))["state"], "starting")
      << "the restart was over before the reads: they proved nothing";
  std::printf("slowest GET during a restart: %.3f s\n", slowest);
  std::filesystem::remove(w + "/slow");
  EXPECT_TRUE(zt::wait_for(
      [&] { return json_body(c.get("/api/v1/services/slow"))["state"] == "running"; }, 30));
}
