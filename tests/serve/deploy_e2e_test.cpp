// End to end, as a user would do it: `zenith train` a SeedCNN for one epoch on (part of)
// Fashion-MNIST, start `zenith server`, `zenith deploy` the checkpoint, classify real test images
// as PNGs over HTTPS with the printed token, and compare with `zenith eval --predictions` on the
// same images. Then tokens, redeploy, rollback and undeploy through the CLI.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "data/image_codec.h"
#include "serve_test_util.h"
#include "support/files.h"
#include "support/temp_dir.h"

namespace zenith::serve {
namespace {

using nlohmann::json;
using zenith::testing::read_all;
using zenith::testing::TempDir;

const char* kFashion = "/usr/share/datasets/fashion-mnist";

// Runs a shell command line; returns its exit status, stdout+stderr in *out.
int run(const std::string& cmd, std::string* out, const std::string& log) {
  const int rc = std::system((cmd + " > " + log + " 2>&1").c_str());
  *out = read_all(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// GET over plain HTTP (the platform API).
// GET `url` with the bearer `token` (every platform route needs one).
std::string read_all_url(const std::string& url, const std::string& token) {
  httplib::Client c(url.substr(0, url.find('/', 8)));
  c.set_bearer_token_auth(token);
  // As the CLI waits (60 s).
  c.set_read_timeout(60);
  auto r = c.Get(url.substr(url.find('/', 8)));
  if (!r) ADD_FAILURE() << "GET " << url << ": " << httplib::to_string(r.error());
  return r ? r->body : "";
}

std::string match(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? m[1].str() : "";
}

class DeployEndToEnd : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_pid_ > 0) {
      kill(server_pid_, SIGTERM);
      for (int i = 0; i < 100 && kill(server_pid_, 0) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  pid_t server_pid_ = 0;
};

TEST_F(DeployEndToEnd, TrainDeployClassifyOverHttpsEqualsEval) {
  if (!std::filesystem::exists(std::string(kFashion) + "/t10k-images-idx3-ubyte") &&
      !std::filesystem::exists(std::string(kFashion) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  TempDir dir("deploy_e2e");
  const std::string z = ZENITH_BINARY, w = dir.str();
  std::string out;
  ASSERT_EQ(run(z +
                    " train --model seedcnn --dataset fashion-mnist --epochs 1 --limit-train 4000 "
                    "--limit-test 200 --progress none --out " +
                    w + "/out",
                &out, w + "/train.log"),
            0)
      << out;
  const std::string ckpt = w + "/out/checkpoint_epoch_1.safetensors";
  ASSERT_TRUE(std::filesystem::exists(ckpt)) << out;

  // The server, in the background; its URL appears in DATA/server.url.
  const std::string data = w + "/srv";
  ASSERT_EQ(std::system(("(" + z + " server --port 0 --data " + data + " > " + w +
                         "/server.log 2>&1 & echo $! > " + w + "/server.pid)")
                            .c_str()),
            0);
  for (int i = 0; i < 100 && server_pid_ == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server_pid_ = std::atoi(read_all(w + "/server.pid").c_str());
  }
  std::string server_url;
  for (int i = 0; i < 200 && server_url.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server_url = read_all(data + "/server.url");
    while (!server_url.empty() && server_url.back() == '\n') server_url.pop_back();
  }
  ASSERT_FALSE(server_url.empty()) << read_all(w + "/server.log");
  const std::string client = " --server " + server_url + " --data " + data;
  std::string admin = read_all(data + "/token");
  while (!admin.empty() && admin.back() == '\n') admin.pop_back();

  ASSERT_EQ(
      run(z + " deploy --model " + ckpt + " --name fmnist-api" + client, &out, w + "/deploy.log"),
      0)
      << out;
  const std::string url = match(out, R"(url:\s+(https://127\.0\.0\.1:\d+))");
  const std::string token = match(out, R"(token:\s+(zt_[0-9a-f]{64}))");
  const std::string cert = match(out, R"(cert:\s+(\S+))");
  ASSERT_FALSE(url.empty()) << out;
  ASSERT_FALSE(token.empty()) << out;
  ASSERT_EQ(cert, data + "/tls/cert.pem");

  // Classify the first 200 test images, each as a PNG, over verified HTTPS.
  const int n = 200;
  auto test_set = dataset::FashionMnistDataset(kFashion, "test");
  httplib::Client https(url);
  https.enable_server_certificate_verification(true);
  https.set_ca_cert_path(cert.c_str());
  https.set_bearer_token_auth(token);
  std::vector<int64_t> served;
  for (int i = 0; i < n; ++i) {
    auto row = test_set.get(i);
    auto r = https.Post("/v2/models/fmnist-api/classify?top_k=1", vision::encode_png(row[0]),
                        "image/png");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << r->body;
    served.push_back(json::parse(r->body)["predictions"][0]["class"].get<int64_t>());
  }
  ASSERT_EQ(run(z + " eval --checkpoint " + ckpt + " --dataset fashion-mnist --limit " +
                    std::to_string(n) + " --predictions " + w + "/pred.jsonl",
                &out, w + "/eval.log"),
            0)
      << out;
  std::ifstream preds(w + "/pred.jsonl");
  int compared = 0, equal = 0, correct = 0;
  for (std::string line; std::getline(preds, line);) {
    json p = json::parse(line);
    const int64_t i = p["index"];
    ASSERT_LT(i, n);
    ++compared;
    equal += served[size_t(i)] == p["prediction"].get<int64_t>();
    correct += served[size_t(i)] == p["label"].get<int64_t>();
  }
  EXPECT_EQ(compared, n);
  EXPECT_EQ(equal, n) << "the service and `zenith eval` disagree on " << n - equal << " images";
  EXPECT_GT(correct, n / 2) << "one epoch should classify most images";  // a trained model

  // `zenith services` shows it running.
  ASSERT_EQ(run(z + " services" + client, &out, w + "/services.log"), 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(fmnist-api\s+1\s+running\s+https://)"))) << out;

  // The server reports the service's request rate and recent mean latency (from its /metrics,
  // sampled each second) while requests arrive.
  json live;
  auto first = test_set.get(0);
  for (int i = 0; i < 60; ++i) {
    https.Post("/v2/models/fmnist-api/classify", vision::encode_png(first[0]), "image/png");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    live = json::parse(read_all_url(server_url + "/api/v1/services/fmnist-api", admin));
    if (live["latency_ms"].get<double>() > 0 && live["requests_per_s"].get<double>() > 0 &&
        live["requests_total"].get<int64_t>() >= n)  // sampled each second: it may lag
      break;
  }
  EXPECT_GT(live["latency_ms"].get<double>(), 0) << live.dump();
  EXPECT_LT(live["latency_ms"].get<double>(), 10000) << live.dump();
  EXPECT_GT(live["requests_per_s"].get<double>(), 0) << live.dump();
  EXPECT_GE(live["requests_total"].get<int64_t>(), n) << live.dump();

  // A second token through the CLI works until revoked.
  ASSERT_EQ(
      run(z + " token create --service fmnist-api --expires 1h" + client, &out, w + "/token.log"),
      0)
      << out;
  const std::string token2 = match(out, R"((zt_[0-9a-f]{64}))");
  const std::string token2_id = match(out, R"(token (\d+) for service)");
  ASSERT_FALSE(token2.empty()) << out;
  httplib::Client https2(url);
  https2.set_ca_cert_path(cert.c_str());
  https2.enable_server_certificate_verification(true);
  https2.set_bearer_token_auth(token2);
  EXPECT_EQ(https2.Get("/v2/models/fmnist-api")->status, 200);
  ASSERT_EQ(run(z + " token list" + client, &out, w + "/tokens.log"), 0) << out;
  EXPECT_NE(out.find("fmnist-api"), std::string::npos);
  EXPECT_EQ(out.find(token2.substr(3)), std::string::npos) << "token list shows a secret";
  ASSERT_EQ(run(z + " token revoke " + token2_id + client, &out, w + "/revoke.log"), 0) << out;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the service re-reads each 1 s
  EXPECT_EQ(https2.Get("/v2/models/fmnist-api")->status, 401);
  EXPECT_EQ(https.Get("/v2/models/fmnist-api")->status, 200);

  // A service that dies is started again by the server (same version, new process).
  json before = json::parse(read_all_url(server_url + "/api/v1/services/fmnist-api", admin));
  const int old_pid = before["pid"].get<int>();
  ASSERT_GT(old_pid, 0);
  kill(old_pid, SIGKILL);
  json again;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    again = json::parse(read_all_url(server_url + "/api/v1/services/fmnist-api", admin));
    if (again["state"] == "running" && again["pid"].get<int>() != old_pid) break;
  }
  ASSERT_EQ(again["state"], "running") << again.dump();
  ASSERT_NE(again["pid"].get<int>(), old_pid);
  httplib::Client restarted(again["url"].get<std::string>());
  restarted.set_ca_cert_path(cert.c_str());
  restarted.enable_server_certificate_verification(true);
  restarted.set_bearer_token_auth(token);
  auto row0 = test_set.get(0);
  auto r0 =
      restarted.Post("/v2/models/fmnist-api/classify", vision::encode_png(row0[0]), "image/png");
  ASSERT_TRUE(r0);
  EXPECT_EQ(r0->status, 200);
  EXPECT_EQ(json::parse(r0->body)["predictions"][0]["class"].get<int64_t>(), served[0]);

  // Redeploy (version 2), roll back to 1, undeploy.
  ASSERT_EQ(run(z + " deploy --model " + ckpt + " --name fmnist-api --max-batch 8" + client, &out,
                w + "/deploy2.log"),
            0)
      << out;
  EXPECT_NE(out.find("version 2"), std::string::npos) << out;
  ASSERT_EQ(run(z + " services rollback fmnist-api" + client, &out, w + "/rollback.log"), 0) << out;
  EXPECT_NE(out.find("serving version 1"), std::string::npos) << out;
  const std::string url1 = match(out, R"((https://127\.0\.0\.1:\d+))");
  httplib::Client after(url1);
  after.set_ca_cert_path(cert.c_str());
  after.enable_server_certificate_verification(true);
  after.set_bearer_token_auth(token);
  auto meta = after.Get("/v2/models/fmnist-api");
  ASSERT_TRUE(meta);
  EXPECT_EQ(json::parse(meta->body)["versions"][0], "1");
  ASSERT_EQ(run(z + " services undeploy fmnist-api" + client, &out, w + "/undeploy.log"), 0) << out;
  EXPECT_NE(out.find("undeployed"), std::string::npos);
  after.set_connection_timeout(2);
  EXPECT_FALSE(after.Get("/v2/health/live"));
  ASSERT_EQ(run(z + " services versions fmnist-api" + client, &out, w + "/versions.log"), 0) << out;
  EXPECT_NE(out.find("\n2 "), std::string::npos) << out;
}

// `zenith serve CHECKPOINT` in the foreground, no server: packages the checkpoint, prints a first
// token, and answers over HTTPS; `zenith token --local` manages that store's tokens.
TEST(ServeForeground, CheckpointToHttpsServiceWithLocalTokens) {
  TempDir dir("serve_fg");
  const std::string z = ZENITH_BINARY, w = dir.str();
  const std::string ckpt = test::write_seedcnn_checkpoint(w);
  ASSERT_EQ(std::system(("(" + z + " serve " + ckpt + " --name fg --port 0 --port-file " + w +
                         "/port --data " + w + "/data > " + w + "/serve.log 2>&1 & echo $! > " + w +
                         "/serve.pid)")
                            .c_str()),
            0);
  int port = 0;
  for (int i = 0; i < 300 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    port = std::atoi(read_all(w + "/port").c_str());
  }
  const pid_t pid = std::atoi(read_all(w + "/serve.pid").c_str());
  struct Stop {
    pid_t pid;
    ~Stop() {
      if (pid > 0) kill(pid, SIGTERM);
    }
  } stop{pid};
  ASSERT_GT(port, 0) << read_all(w + "/serve.log");
  const std::string log = read_all(w + "/serve.log");
  const std::string token = match(log, R"(token \(shown once\): (zt_[0-9a-f]{64}))");
  ASSERT_FALSE(token.empty()) << log;
  httplib::Client c("https://127.0.0.1:" + std::to_string(port));
  c.enable_server_certificate_verification(true);
  c.set_ca_cert_path((w + "/data/tls/cert.pem").c_str());
  c.set_bearer_token_auth(token);
  Tensor image = Tensor::zeros({28, 28, 1}, DType::u8);
  auto r = c.Post("/v2/models/fg/classify", vision::encode_png(image), "image/png");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  std::string out;
  ASSERT_EQ(
      run(z + " token create --local --service fg --data " + w + "/data", &out, w + "/token.log"),
      0)
      << out;
  const std::string token2 = match(out, R"((zt_[0-9a-f]{64}))");
  const std::string id2 = match(out, R"(token (\d+) for service)");
  c.set_bearer_token_auth(token2);
  auto m2 = c.Get("/v2/models/fg");
  ASSERT_TRUE(m2);
  EXPECT_EQ(m2->status, 200) << m2->body << "\n" << out;
  ASSERT_EQ(
      run(z + " token revoke " + id2 + " --local --data " + w + "/data", &out, w + "/revoke.log"),
      0)
      << out;
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(c.Get("/v2/models/fg")->status, 401);
  // Plain HTTP is not offered on the HTTPS port.
  httplib::Client plain("http://127.0.0.1:" + std::to_string(port));
  plain.set_read_timeout(3);
  auto p = plain.Get("/v2/health/live");
  EXPECT_TRUE(!p || p->status != 200);
  // SIGTERM stops the service through its handler, not by the default action.
  kill(pid, SIGTERM);
  stop.pid = 0;
  bool stopped = false;
  for (int i = 0; i < 100 && !stopped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stopped = read_all(w + "/serve.log").find("[serve] signal 15: stopping") != std::string::npos;
  }
  EXPECT_TRUE(stopped) << read_all(w + "/serve.log");
}

}  // namespace
}  // namespace zenith::serve
