// The dashboard's API behind the pages on a real `zenith server`: token required, ids checked,
// metrics ingested per rank.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "platform/http/api_client.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace zp = zenith::platform;
namespace zt = zenith::testing;
using nlohmann::json;
using zt::json_body;
using zt::ServerProcess;

namespace {

long long submit(zp::ApiClient& c, const std::string& entry, int npu = 1) {
  json spec = {{"job", {{"name", "dash"}, {"resources", {{"npu", npu}}}, {"entry", entry}}}};
  auto r = c.post("/api/v1/jobs", spec.dump());
  EXPECT_EQ(r.status, 201) << r.body;
  return json_body(r).value("id", 0LL);
}

class DashboardServer : public ::testing::Test {
 protected:
  zt::TempDir dir{"dashboard_server"};
};

TEST_F(DashboardServer, ApiNeedsTheToken) {
  ServerProcess server(dir.str() + "/data", {"--cpu-devices", "2"});
  auto anon = server.client("");
  auto wrong = server.client("not-the-token");
  auto ok = server.client();
  const long long id = submit(ok, "echo hello");
  const std::string j = "/api/v1/dashboard/jobs/" + std::to_string(id);
  for (const std::string& path :
       {std::string("/api/v1/dashboard/session"), std::string("/api/v1/dashboard/jobs"), j,
        j + "/series", j + "/usage", j + "/logs", std::string("/api/v1/dashboard/cluster")}) {
    auto r = anon.get(path);
    EXPECT_EQ(r.status, 401) << path << ": " << r.body;
    EXPECT_NE(json_body(r).value("error", "").find("Authorization"), std::string::npos);
    EXPECT_EQ(wrong.get(path).status, 401) << path;
    EXPECT_EQ(ok.get(path).status, 200) << path << ": " << ok.get(path).body;
  }
  // The page itself is public (it holds no data) and asks for the token.
  EXPECT_EQ(anon.get("/").status, 200);
}

TEST_F(DashboardServer, NeverAnotherJobsLogsUnderAWrongId) {
  ServerProcess server(dir.str() + "/data", {"--cpu-devices", "2"});
  auto c = server.client();
  const long long a = submit(c, "echo secret-of-job-a");
  const long long b = submit(c, "echo log-of-job-b");
  ASSERT_TRUE(zt::wait_for(
      [&] {
        auto r = json_body(c.get("/api/v1/dashboard/jobs/" + std::to_string(b)));
        return r.is_object() && r["state"] == "succeeded";
      },
      30));
  auto logs = [&](const std::string& id, const std::string& q = "") {
    return c.get("/api/v1/dashboard/jobs/" + id + "/logs" + q);
  };
  auto rb = logs(std::to_string(b));
  ASSERT_EQ(rb.status, 200);
  EXPECT_NE(json_body(rb)["text"].get<std::string>().find("log-of-job-b"), std::string::npos);
  EXPECT_EQ(json_body(rb)["text"].get<std::string>().find("secret-of-job-a"), std::string::npos);
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
  auto first = json_body(logs(sa, "?offset=0"));
  EXPECT_NE(first["text"].get<std::string>().find("secret-of-job-a"), std::string::npos);
  auto next = json_body(logs(sa, "?offset=" + std::to_string(first["offset"].get<long long>())));
  EXPECT_EQ(next["text"], "");
}

// What `zenith train --profile` leaves in the job dir ($ZENITH_JOB_DIR/profile): its summary as
// JSON (with the trace's size), the trace as a download, both behind the token; 404 before.
TEST_F(DashboardServer, ServesTheJobsProfileAndItsTrace) {
  ServerProcess server(dir.str() + "/data", {"--cpu-devices", "2"});
  auto c = server.client();
  auto anon = server.client("");
  const long long plain = submit(c, "echo no profile");
  const long long profiled = submit(
      c,
      "mkdir -p \"$ZENITH_JOB_DIR/profile\" && cd \"$ZENITH_JOB_DIR/profile\" && "
      "echo '{\"steps\": 4, \"phases\": [], \"ops\": [{\"name\": \"conv2d\"}]}' > summary.json && "
      "echo '{\"traceEvents\": []}' > trace.json");
  for (long long id : {plain, profiled})
    ASSERT_TRUE(zt::wait_for(
        [&] {
          auto r = json_body(c.get("/api/v1/dashboard/jobs/" + std::to_string(id)));
          return r.is_object() && r["state"] == "succeeded";
        },
        30));
  const std::string p = "/api/v1/dashboard/jobs/" + std::to_string(profiled) + "/profile";
  const std::string none = "/api/v1/dashboard/jobs/" + std::to_string(plain) + "/profile";
  for (const std::string& path : {p, p + "/trace"}) EXPECT_EQ(anon.get(path).status, 401) << path;
  for (const std::string& path : {none, none + "/trace"}) {
    auto r = c.get(path);
    EXPECT_EQ(r.status, 404) << path << ": " << r.body;
    EXPECT_NE(json_body(r).value("error", "").find("--profile"), std::string::npos) << r.body;
  }
  auto summary = c.get(p);
  ASSERT_EQ(summary.status, 200) << summary.body;
  const json s = json_body(summary);
  EXPECT_EQ(s["steps"], 4);
  EXPECT_EQ(s["ops"][0]["name"], "conv2d");
  EXPECT_EQ(s["job_id"], profiled);
  EXPECT_EQ(s["trace_bytes"], std::string("{\"traceEvents\": []}\n").size());
  auto trace = c.get(p + "/trace");
  ASSERT_EQ(trace.status, 200) << trace.body;
  EXPECT_EQ(json_body(trace), json::parse(R"({"traceEvents": []})"));
  EXPECT_EQ(c.get("/api/v1/dashboard/jobs/999/profile").status, 404);
}

TEST_F(DashboardServer, IngestsEachRanksMetricsAndSamplesItsDevice) {
  ServerProcess server(dir.str() + "/data", {"--cpu-devices", "2"});
  auto c = server.client();
  // Two ranks append metrics.jsonl lines to the file the platform names, then stay a while so
  // the server samples their devices and /metrics shows them running.
  const std::string entry =
      "for i in 1 2 3 4 5; do echo \"{\\\"step\\\": $i, \\\"epoch\\\": 1, \\\"name\\\": "
      "\\\"loss\\\", \\\"value\\\": $((RANK_ID + 1)).$i, \\\"time\\\": 0}\" >> "
      "\"$ZENITH_METRICS_FILE\"; done; sleep 10";
  const long long id = submit(c, entry, 2);
  const std::string j = "/api/v1/dashboard/jobs/" + std::to_string(id);
  json series;
  ASSERT_TRUE(zt::wait_for(
      [&] {
        series = json_body(c.get(j + "/series"));
        return series.is_object() && series["series"].size() == 2 &&
               series["series"][1]["total"] == 5;
      },
      30))
      << series.dump();
  EXPECT_EQ(series["series"][0]["rank"], 0);
  EXPECT_EQ(series["series"][1]["rank"], 1);
  EXPECT_DOUBLE_EQ(series["series"][1]["value"][4].get<double>(), 2.5);
  std::string prom;
  ASSERT_TRUE(zt::wait_for(
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
  ASSERT_TRUE(zt::wait_for(
      [&] {
        usage = json_body(c.get(j + "/usage"));
        if (!usage.is_object() || usage["ranks"].size() != 2) return false;
        for (const auto& m :
             usage["ranks"][1]["memory_bytes"])  // resident memory of rank 1's shell
          if (m.get<double>() > 0) return true;
        return false;
      },
      20))
      << usage.dump();
  EXPECT_EQ(usage["ranks"][1]["rank"], 1);
  auto list = json_body(c.get("/api/v1/dashboard/jobs?state=running"));
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_DOUBLE_EQ(list[0]["last_loss"].get<double>(), 1.5);
  EXPECT_EQ(json_body(c.get("/api/v1/dashboard/jobs?state=failed")).size(), 0u);
  EXPECT_EQ(c.get("/api/v1/dashboard/jobs?state=bogus").status, 400);
}

// A `zenith finetune` job: its tokens/s and eval loss per step reach the dashboard's series, and
// the loss spike it reports (--inject-spike, the spike guard's test hook) becomes an alert with
// the job, rank, step and reason.
TEST_F(DashboardServer, FinetuneJobShowsTokensEvalLossAndSpikeAlerts) {
  ServerProcess server(dir.str() + "/data", {"--cpu-devices", "2"});
  auto c = server.client();
  const std::string llm = std::string(ZENITH_SOURCE_DIR) + "/examples/llm";
  const long long id =
      submit(c, std::string(ZENITH_BINARY) + " finetune --model " + llm + "/demo-llama --data " +
                    llm + "/finetune/train.jsonl --eval-data " + llm +
                    "/finetune/eval.jsonl --max-steps 12 --batch-size 4 --eval-steps 4 "
                    "--inject-spike 10 --out " +
                    dir.str() + "/out");
  const std::string j = "/api/v1/dashboard/jobs/" + std::to_string(id);
  json job;
  ASSERT_TRUE(zt::wait_for(
      [&] {
        job = json_body(c.get("/api/v1/jobs/" + std::to_string(id)));
        return job.is_object() && (job["state"] == "succeeded" || job["state"] == "failed");
      },
      240))
      << job.dump();
  ASSERT_EQ(job["state"], "succeeded") << job.dump();
  json series;
  auto named = [&](const std::string& name) {
    for (const auto& s : series["series"])
      if (s["name"] == name) return s;
    return json();
  };
  ASSERT_TRUE(zt::wait_for(
      [&] {
        series = json_body(c.get(j + "/series"));
        return series.is_object() && named("eval/loss").is_object() &&
               named("eval/loss")["total"] == 4 && named("tokens_per_second").is_object() &&
               named("tokens_per_second")["total"] == 12;
      },
      30))
      << series.dump();
  EXPECT_EQ(named("eval/loss")["step"], json({0, 4, 8, 12}));
  for (const auto& v : named("tokens_per_second")["value"]) EXPECT_GT(v.get<double>(), 0);
  EXPECT_TRUE(named("spike").is_object()) << "the event's value is a series point too";

  json alerts;
  ASSERT_TRUE(zt::wait_for(
      [&] {
        alerts = json_body(c.get("/api/v1/alerts"));
        for (const auto& a : alerts)
          if (a["kind"] == "training_event") return true;
        return false;
      },
      30))
      << alerts.dump();
  int events = 0;
  for (const auto& a : alerts) {
    if (a["kind"] != "training_event") continue;
    ++events;
    EXPECT_EQ(a["job_id"], id);
    const std::string m = a["message"];
    EXPECT_NE(m.find("rank 0 step 10: spike (loss spike: the loss"), std::string::npos) << m;
    EXPECT_NE(m.find("update skipped"), std::string::npos) << m;
  }
  EXPECT_EQ(events, 1) << alerts.dump();
}

}  // namespace
