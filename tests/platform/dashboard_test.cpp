// The dashboard's server side: downsampling, metrics parsing and storage, and the API behind the
// pages on a real `zenith server` (token required, ids checked, metrics ingested per rank).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "platform/api_client.h"
#include "platform/downsample.h"
#include "platform/metrics_ingest.h"
#include "platform/metrics_store.h"
#include "platform/nvml.h"
#include "test_util.h"

namespace zp = zenith::platform;
using nlohmann::json;
using zp::test::read_all;

namespace {

TEST(Downsample, KeepsEndsAndSpikesWithinBudget) {
  std::vector<double> x, y;
  for (int i = 0; i < 100000; ++i) {
    x.push_back(i);
    y.push_back(std::sin(i / 1000.0));
  }
  y[54321] = 50;  // a spike must survive
  auto idx = zp::lttb_indices(x, y, 500);
  ASSERT_EQ(idx.size(), 500u);
  EXPECT_EQ(idx.front(), 0u);
  EXPECT_EQ(idx.back(), 99999u);
  EXPECT_TRUE(std::is_sorted(idx.begin(), idx.end()));
  EXPECT_NE(std::find(idx.begin(), idx.end(), 54321u), idx.end());
  // Short series come back whole.
  EXPECT_EQ(zp::lttb_indices({1, 2, 3}, {4, 5, 6}, 500).size(), 3u);
}

TEST(MetricLines, ParsesTrainOutputAndSkipsJunk) {
  auto points = zp::parse_metric_lines(
      "{\"step\": 10, \"epoch\": 1, \"name\": \"loss\", \"value\": 0.5, \"time\": 1.5}\n"
      "not json\n"
      "{\"name\": \"no value\"}\n"
      "{\"name\": \"comm_bytes\", \"value\": 4096, \"step\": 3}\n");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].name, "loss");
  EXPECT_EQ(points[0].step, 10);
  EXPECT_EQ(points[0].epoch, 1);
  EXPECT_DOUBLE_EQ(points[0].value, 0.5);
  EXPECT_DOUBLE_EQ(points[0].time, 1.5);
  EXPECT_EQ(points[1].name, "comm_bytes");
  EXPECT_EQ(points[1].step, 3);
}

TEST(MetricsStore, SeriesPerRankDownsampledWithOffsets) {
  zp::test::TempDir dir("metrics_store");
  zp::MetricsStore store(dir.str() + "/zenith.db");
  std::vector<zp::MetricPoint> points;
  for (int i = 0; i < 100000; ++i) points.push_back({"loss", i, i / 1000, 1.0 / (i + 1), 0.0});
  auto t0 = std::chrono::steady_clock::now();
  store.add_points(7, 0, points, 1234);
  store.add_points(7, 1, {{"loss", 0, 0, 2.0, 0.0}}, 10);
  store.add_points(8, 0, {{"epoch_loss", 0, 0, 3.0, 0.0}}, 10);
  auto series = store.series(7, "loss", 0, 800);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(series.total, 100000u);
  EXPECT_EQ(series.step.size(), 800u);
  EXPECT_EQ(series.step.front(), 0);
  EXPECT_EQ(series.step.back(), 99999);
  EXPECT_LT(ms, 3000) << "storing and downsampling 100k points";
  EXPECT_EQ(store.file_offset(7, 0), 1234);
  EXPECT_EQ(store.file_offset(7, 1), 10);
  EXPECT_EQ(store.file_offset(9, 0), 0);
  auto names = store.series_names(7);
  ASSERT_EQ(names.size(), 2u);  // loss on ranks 0 and 1; job 8's series stay apart
  EXPECT_EQ(names[1], std::make_pair(std::string("loss"), 1));
  EXPECT_NEAR(*store.last_value(7, "loss"), 1e-5, 1e-9);  // rank 0's newest
  EXPECT_FALSE(store.last_value(7, "epoch_loss"));
  store.add_usage(7, {{0, 3, 100.0, 0.5, 1 << 20, -1, -1}, {1, 4, 100.0, 0.25, 2 << 20, -1, -1}});
  auto usage = store.usage(7, 100);
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[1].device, 4);
  EXPECT_DOUBLE_EQ(usage[1].cpu_utilization[0], 0.25);
}

TEST(Nvml, SamplesEveryGpuThroughTheLibraryAndClosesIt) {
  EXPECT_EQ(zp::Nvml::open("/nonexistent/libnvidia-ml.so.1"), nullptr);  // no driver: no GPUs
  auto nvml = zp::Nvml::open(ZENITH_FAKE_NVML);
  ASSERT_NE(nvml, nullptr);
  ASSERT_EQ(nvml->device_count(), 2);
  auto busy = nvml->sample(1);
  ASSERT_TRUE(busy);
  EXPECT_DOUBLE_EQ(busy->utilization, 0.42);
  EXPECT_EQ(busy->memory_used, 3ll << 30);
  EXPECT_EQ(busy->memory_total, 80ll << 30);
  EXPECT_DOUBLE_EQ(nvml->sample(0)->utilization, 0);
  EXPECT_FALSE(nvml->sample(2));
  EXPECT_FALSE(nvml->sample(-1));
}

// A `zenith server --port 0` child, SIGTERMed at the end.
class Server {
 public:
  explicit Server(const std::string& data_dir) {
    const std::string log = data_dir + "/server.log";
    std::filesystem::create_directories(data_dir);
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execl(ZENITH_BINARY, "zenith", "server", "--port", "0", "--data", data_dir.c_str(),
            "--cpu-devices", "2", "--grace", "1s", static_cast<char*>(nullptr));
      _exit(127);
    }
    bool up = zp::test::wait_for([&] { return !read_all(data_dir + "/server.url").empty(); }, 20);
    if (!up) ADD_FAILURE() << "server did not start: " << read_all(log);
    url_ = read_all(data_dir + "/server.url");
    while (!url_.empty() && url_.back() == '\n') url_.pop_back();
    token_ = read_all(data_dir + "/token");
    while (!token_.empty() && token_.back() == '\n') token_.pop_back();
  }
  ~Server() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  zp::ApiClient client(const std::string& token) { return zp::ApiClient(url_, token); }
  const std::string& token() const { return token_; }

 private:
  std::string url_, token_;
  pid_t pid_ = 0;
};

json body_of(const zp::HttpResult& r) { return json::parse(r.body.empty() ? "null" : r.body); }

long long submit(zp::ApiClient& c, const std::string& entry, int npu = 1) {
  json spec = {{"job", {{"name", "dash"}, {"resources", {{"npu", npu}}}, {"entry", entry}}}};
  auto r = c.post("/api/v1/jobs", spec.dump());
  EXPECT_EQ(r.status, 201) << r.body;
  return body_of(r).value("id", 0LL);
}

class DashboardServer : public ::testing::Test {
 protected:
  zp::test::TempDir dir{"dashboard_server"};
};

TEST_F(DashboardServer, ApiNeedsTheToken) {
  Server server(dir.str() + "/data");
  auto anon = server.client("");
  auto wrong = server.client("not-the-token");
  auto ok = server.client(server.token());
  const long long id = submit(ok, "echo hello");
  const std::string j = "/api/v1/dashboard/jobs/" + std::to_string(id);
  for (const std::string& path :
       {std::string("/api/v1/dashboard/session"), std::string("/api/v1/dashboard/jobs"), j,
        j + "/series", j + "/usage", j + "/logs", std::string("/api/v1/dashboard/cluster")}) {
    auto r = anon.get(path);
    EXPECT_EQ(r.status, 401) << path << ": " << r.body;
    EXPECT_NE(body_of(r).value("error", "").find("Authorization"), std::string::npos);
    EXPECT_EQ(wrong.get(path).status, 401) << path;
    EXPECT_EQ(ok.get(path).status, 200) << path << ": " << ok.get(path).body;
  }
  // The page itself is public (it holds no data) and asks for the token.
  EXPECT_EQ(anon.get("/").status, 200);
}

TEST_F(DashboardServer, NeverAnotherJobsLogsUnderAWrongId) {
  Server server(dir.str() + "/data");
  auto c = server.client(server.token());
  const long long a = submit(c, "echo secret-of-job-a");
  const long long b = submit(c, "echo log-of-job-b");
  ASSERT_TRUE(zp::test::wait_for(
      [&] {
        auto r = body_of(c.get("/api/v1/dashboard/jobs/" + std::to_string(b)));
        return r.is_object() && r["state"] == "succeeded";
      },
      30));
  auto logs = [&](const std::string& id, const std::string& q = "") {
    return c.get("/api/v1/dashboard/jobs/" + id + "/logs" + q);
  };
  auto rb = logs(std::to_string(b));
  ASSERT_EQ(rb.status, 200);
  EXPECT_NE(body_of(rb)["text"].get<std::string>().find("log-of-job-b"), std::string::npos);
  EXPECT_EQ(body_of(rb)["text"].get<std::string>().find("secret-of-job-a"), std::string::npos);
  const std::string sa = std::to_string(a);
  for (const std::string& bad : {sa + "x", sa + ".0", "0" + sa + "/", "-" + sa, sa + "%20",
                                 std::string("999"), std::string("0"), std::string("x" + sa)}) {
    auto r = logs(bad);
    EXPECT_EQ(r.status, 404) << bad << ": " << r.body;
    EXPECT_EQ(r.body.find("secret-of-job-a"), std::string::npos) << bad;
  }
  for (const char* q : {"?rank=1", "?rank=-1", "?rank=0x", "?rank=%00"}) {
    auto r = logs(sa, q);
    EXPECT_EQ(r.status, 404) << q << ": " << r.body;
    EXPECT_EQ(r.body.find("secret-of-job-a"), std::string::npos) << q;
  }
  // The core API too: "1x" is no job, not job 1.
  auto core = c.get("/api/v1/jobs/" + sa + "x/logs");
  EXPECT_EQ(core.status, 404) << core.body;
  EXPECT_EQ(core.body.find("secret-of-job-a"), std::string::npos);
  // Following by offset returns only what is new.
  auto first = body_of(logs(sa, "?offset=0"));
  EXPECT_NE(first["text"].get<std::string>().find("secret-of-job-a"), std::string::npos);
  auto next = body_of(logs(sa, "?offset=" + std::to_string(first["offset"].get<long long>())));
  EXPECT_EQ(next["text"], "");
}

TEST_F(DashboardServer, IngestsEachRanksMetricsAndSamplesItsDevice) {
  Server server(dir.str() + "/data");
  auto c = server.client(server.token());
  // Two ranks append metrics.jsonl lines to the file the platform names, then stay a while so
  // the server samples their devices and /metrics shows them running.
  const std::string entry =
      "for i in 1 2 3 4 5; do echo \"{\\\"step\\\": $i, \\\"epoch\\\": 1, \\\"name\\\": "
      "\\\"loss\\\", \\\"value\\\": $((RANK_ID + 1)).$i, \\\"time\\\": 0}\" >> "
      "\"$ZENITH_METRICS_FILE\"; done; sleep 10";
  const long long id = submit(c, entry, 2);
  const std::string j = "/api/v1/dashboard/jobs/" + std::to_string(id);
  json series;
  ASSERT_TRUE(zp::test::wait_for(
      [&] {
        series = body_of(c.get(j + "/series"));
        return series.is_object() && series["series"].size() == 2 &&
               series["series"][1]["total"] == 5;
      },
      30))
      << series.dump();
  EXPECT_EQ(series["series"][0]["rank"], 0);
  EXPECT_EQ(series["series"][1]["rank"], 1);
  EXPECT_DOUBLE_EQ(series["series"][1]["value"][4].get<double>(), 2.5);
  std::string prom;
  ASSERT_TRUE(zp::test::wait_for(
      [&] {
        prom = c.get("/metrics").body;
        return prom.find("zenith_rank_memory_bytes{job=\"" + std::to_string(id) +
                         "\",rank=\"1\"") != std::string::npos;
      },
      20))
      << prom;
  EXPECT_NE(prom.find("zenith_job_metric{job=\"" + std::to_string(id) +
                      "\",rank=\"0\",name=\"loss\"} 1.5"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("zenith_jobs{state="), std::string::npos);  // the platform's own series
  json usage;
  ASSERT_TRUE(zp::test::wait_for(
      [&] {
        usage = body_of(c.get(j + "/usage"));
        if (!usage.is_object() || usage["ranks"].size() != 2) return false;
        for (const auto& m :
             usage["ranks"][1]["memory_bytes"])  // resident memory of rank 1's shell
          if (m.get<double>() > 0) return true;
        return false;
      },
      20))
      << usage.dump();
  EXPECT_EQ(usage["ranks"][1]["rank"], 1);
  auto list = body_of(c.get("/api/v1/dashboard/jobs?state=running"));
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_DOUBLE_EQ(list[0]["last_loss"].get<double>(), 1.5);
  EXPECT_EQ(body_of(c.get("/api/v1/dashboard/jobs?state=failed")).size(), 0u);
  EXPECT_EQ(c.get("/api/v1/dashboard/jobs?state=bogus").status, 400);
}

}  // namespace
