// The inference service over real HTTPS on loopback (src/serve/inference_server.cpp): KServe v2
// endpoints, /classify with PNG and JPEG, token semantics, bad input, a fuzz run, batching,
// 429 and 504, metrics.
#include "serve/inference_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <random>

#include "data/image_codec.h"
#include "platform/deployments/deployment_store.h"
#include "platform/deployments/tls_cert.h"
#include "serve_test_util.h"
#include "support/temp_dir.h"

namespace zenith::serve {
namespace {

using nlohmann::json;
using test::RunningServer;
using zenith::testing::TempDir;

// One package and token store for the whole suite; each test starts its own server.
class InferenceServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("inference");
    const std::string ckpt = test::write_seedcnn_checkpoint(dir_->str());
    write_package(ckpt, package(), "fmnist");
    platform::DeploymentStore store(db());
    token_ = store.create_token("fmnist").second;
    other_token_ = store.create_token("other-service").second;
    auto [revoked, secret] = store.create_token("fmnist");
    store.revoke_token(revoked.id);
    revoked_token_ = secret;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string package() { return dir_->str() + "/pkg"; }
  static std::string db() { return dir_->str() + "/zenith.db"; }
  static ServeOptions options() {
    ServeOptions o;
    o.tls_dir = dir_->str() + "/tls";
    o.token_db = db();
    o.batch.max_delay_ms = 2;
    return o;
  }
  // The package's own network, for reference outputs.
  static std::vector<float> reference_logits(const std::vector<float>& input, int64_t n) {
    auto spec = read_package(package());
    auto net = load_network(package(), spec);
    NoGradGuard no_grad;
    Tensor y = net->forward(Tensor::from_vector(input, {n, 1, 28, 28})).contiguous();
    return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
  }
  static json infer_body(const std::vector<float>& values, int64_t n,
                         const std::string& dtype = "FP32") {
    return {
        {"inputs",
         {{{"name", "input"}, {"shape", {n, 1, 28, 28}}, {"datatype", dtype}, {"data", values}}}}};
  }
  static std::vector<float> random_input(int64_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d;
    std::vector<float> v(size_t(n * 784));
    for (auto& x : v) x = d(rng);
    return v;
  }
  static void expect_error(const httplib::Result& r, int status) {
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, status) << r->body;
    json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(body.is_object()) << r->body;
    ASSERT_TRUE(body.contains("error")) << r->body;
    EXPECT_TRUE(body["error"].is_string());
  }

  static TempDir* dir_;
  static std::string token_, other_token_, revoked_token_;
};

TempDir* InferenceServerTest::dir_ = nullptr;
std::string InferenceServerTest::token_, InferenceServerTest::other_token_,
    InferenceServerTest::revoked_token_;

TEST_F(InferenceServerTest, HealthNeedsNoTokenAndTlsIsVerified) {
  RunningServer s(package(), options());
  EXPECT_EQ(s.server->url().rfind("https://127.0.0.1:", 0), 0u);
  auto c = s.client();
  auto live = c->Get("/v2/health/live");
  ASSERT_TRUE(live) << httplib::to_string(live.error());
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(c->Get("/v2/health/ready")->status, 200);
  // Plain HTTP to the HTTPS port gets no answer.
  httplib::Client plain("http://127.0.0.1:" + std::to_string(s.port));
  plain.set_read_timeout(3);
  auto r = plain.Get("/v2/health/live");
  EXPECT_TRUE(!r || r->status == 400) << (r ? r->body : "");
  // A client that does not trust the self-signed certificate refuses it.
  httplib::Client untrusting(s.server->url());
  untrusting.enable_server_certificate_verification(true);
  untrusting.set_ca_cert_path("/nonexistent.pem");
  EXPECT_FALSE(untrusting.Get("/v2/health/live"));
  // The self-signed serving certificate is a leaf, not a CA that could sign other names.
  EXPECT_FALSE(zenith::platform::is_ca_cert(dir_->str() + "/tls/cert.pem"));
}

TEST_F(InferenceServerTest, TokenSemantics401And403) {
  ServeOptions o = options();
  o.admin_token = "zt_platform_" + std::string(52, '7');
  RunningServer s(package(), o);
  // Only /v2/health/* is open: /metrics and /v2 need the service's token, or for /metrics the
  // platform's own (its monitor scrapes with DATA/token).
  expect_error(s.client()->Get("/metrics"), 401);
  expect_error(s.client(other_token_)->Get("/metrics"), 403);
  expect_error(s.client()->Get("/v2"), 401);
  expect_error(s.client(o.admin_token)->Get("/v2"), 401);
  EXPECT_EQ(s.client(token_)->Get("/metrics")->status, 200);
  EXPECT_EQ(s.client(o.admin_token)->Get("/metrics")->status, 200);
  EXPECT_EQ(s.client(token_)->Get("/v2")->status, 200);
  const std::string body = infer_body(random_input(1, 1), 1).dump();
  expect_error(s.client()->Post("/v2/models/fmnist/infer", body, "application/json"), 401);
  expect_error(s.client("zt_" + std::string(64, '0'))
                   ->Post("/v2/models/fmnist/infer", body, "application/json"),
               401);
  expect_error(s.client(revoked_token_)->Post("/v2/models/fmnist/infer", body, "application/json"),
               401);
  expect_error(s.client(other_token_)->Post("/v2/models/fmnist/infer", body, "application/json"),
               403);
  expect_error(s.client()->Get("/v2/models/fmnist"), 401);
  auto ok = s.client(token_)->Post("/v2/models/fmnist/infer", body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(s.client()->Get("/v2/models/fmnist")->status, 401);
  auto meta = s.client(token_)->Get("/v2/models/fmnist");
  ASSERT_EQ(meta->status, 200);
  json m = json::parse(meta->body);
  EXPECT_EQ(m["inputs"][0]["shape"], json({-1, 1, 28, 28}));
  EXPECT_EQ(m["parameters"]["labels"][1], "Trouser");
}

TEST_F(InferenceServerTest, InferMatchesTheNetworkForFp32AndUint8) {
  RunningServer s(package(), options());
  auto c = s.client(token_);
  const auto input = random_input(3, 2);
  auto r = c->Post("/v2/models/fmnist/infer", infer_body(input, 3).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json out = json::parse(r->body);
  EXPECT_EQ(out["model_name"], "fmnist");
  EXPECT_EQ(out["outputs"][0]["name"], "logits");
  EXPECT_EQ(out["outputs"][0]["shape"], json({3, 10}));
  const auto expected = reference_logits(input, 3);
  auto logits = out["outputs"][0]["data"].get<std::vector<float>>();
  ASSERT_EQ(logits.size(), expected.size());
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(logits[i], expected[i], 1e-4);
  for (int i = 0; i < 3; ++i) {
    const auto* row = expected.data() + i * 10;
    EXPECT_EQ(out["outputs"][2]["data"][i].get<int64_t>(), std::max_element(row, row + 10) - row);
  }
  // Raw pixels (UINT8, CHW) are preprocessed like the training pipeline.
  std::vector<int> pixels(784);
  std::vector<float> normalized(784);
  for (int i = 0; i < 784; ++i) {
    pixels[size_t(i)] = (i * 37) % 256;
    normalized[size_t(i)] =
        float((float(pixels[size_t(i)]) * float(1.0 / 255.0) - 0.2860) / 0.3530);
  }
  json raw = {
      {"inputs",
       {{{"name", "input"}, {"shape", {1, 28, 28}}, {"datatype", "UINT8"}, {"data", pixels}}}}};
  auto r8 = c->Post("/v2/models/fmnist/infer", raw.dump(), "application/json");
  ASSERT_EQ(r8->status, 200) << r8->body;
  auto l8 = json::parse(r8->body)["outputs"][0]["data"].get<std::vector<float>>();
  const auto e8 = reference_logits(normalized, 1);
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(l8[i], e8[i], 1e-4);
}

TEST_F(InferenceServerTest, ClassifyPngAndJpegReturnsTopKLabels) {
  RunningServer s(package(), options());
  auto c = s.client(token_);
  Tensor image = Tensor::empty({28, 28, 1}, DType::u8);
  std::vector<float> normalized(784);
  for (int i = 0; i < 784; ++i) {
    image.data<uint8_t>()[i] = uint8_t((i * 7) % 256);
    normalized[size_t(i)] = float((float((i * 7) % 256) * float(1.0 / 255.0) - 0.2860) / 0.3530);
  }
  const auto expected = reference_logits(normalized, 1);
  const int64_t best = std::max_element(expected.begin(), expected.end()) - expected.begin();
  auto r = c->Post("/v2/models/fmnist/classify?top_k=3", vision::encode_png(image), "image/png");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json out = json::parse(r->body);
  ASSERT_EQ(out["predictions"].size(), 3u);
  EXPECT_EQ(out["predictions"][0]["class"].get<int64_t>(), best);
  EXPECT_EQ(out["predictions"][0]["label"], read_package(package()).labels[size_t(best)]);
  EXPECT_GE(out["predictions"][0]["probability"].get<double>(),
            out["predictions"][1]["probability"].get<double>());
  // JPEG is lossy: only check it decodes and answers.
  auto j = c->Post("/v2/models/fmnist/classify", vision::encode_jpeg(image), "image/jpeg");
  ASSERT_EQ(j->status, 200) << j->body;
  EXPECT_EQ(json::parse(j->body)["predictions"].size(), 5u);
}

TEST_F(InferenceServerTest, BadInputGets4xxWithAnErrorAndTheServiceStaysUp) {
  ServeOptions o = options();
  o.max_body_bytes = 64 * 1024;
  RunningServer s(package(), o);
  auto c = s.client(token_);
  const auto post = [&](const std::string& path, const std::string& body,
                        const char* type = "application/json") {
    return c->Post(path, body, type);
  };
  expect_error(post("/v2/models/fmnist/infer", "{\"inputs\": [1, 2"), 400);  // malformed
  expect_error(post("/v2/models/fmnist/infer", "[]"), 400);
  expect_error(post("/v2/models/fmnist/infer", "{\"inputs\": []}"), 400);
  json wrong_shape = infer_body(random_input(1, 3), 1);
  wrong_shape["inputs"][0]["shape"] = {1, 3, 28, 28};
  expect_error(post("/v2/models/fmnist/infer", wrong_shape.dump()), 400);
  json short_data = infer_body(std::vector<float>(100, 0.f), 1);
  expect_error(post("/v2/models/fmnist/infer", short_data.dump()), 400);
  expect_error(post("/v2/models/fmnist/infer", infer_body(random_input(1, 4), 1, "FP16").dump()),
               400);
  json strings = infer_body(random_input(1, 5), 1);
  strings["inputs"][0]["data"][7] = "x";
  expect_error(post("/v2/models/fmnist/infer", strings.dump()), 400);
  json bad_pixels = infer_body(std::vector<float>(784, 300.f), 1, "UINT8");
  expect_error(post("/v2/models/fmnist/infer", bad_pixels.dump()), 400);
  expect_error(post("/v2/models/fmnist/classify", "GIF89a not an image", "image/gif"), 415);
  expect_error(
      post("/v2/models/fmnist/classify", std::string("\x89PNG\r\n\x1a\n garbage", 17), "image/png"),
      400);
  expect_error(
      post("/v2/models/fmnist/classify", std::string("\xff\xd8\xff\xe0 broken", 11), "image/jpeg"),
      400);
  expect_error(post("/v2/models/fmnist/infer", std::string(100 * 1024, ' ')), 413);
  expect_error(post("/v2/models/nope/infer", infer_body(random_input(1, 6), 1).dump()), 404);
  expect_error(post("/v2/models/fmnist/versions/7/infer", infer_body(random_input(1, 6), 1).dump()),
               404);
  expect_error(c->Get("/v2/nothing/here"), 404);
  // Still answers correctly.
  const auto input = random_input(1, 9);
  auto ok = post("/v2/models/fmnist/infer", infer_body(input, 1).dump());
  ASSERT_EQ(ok->status, 200) << ok->body;
  EXPECT_NEAR(json::parse(ok->body)["outputs"][0]["data"][0].get<float>(),
              reference_logits(input, 1)[0], 1e-4);
}

TEST_F(InferenceServerTest, FuzzedBodiesNeverCrashOrGet5xx) {
  RunningServer s(package(), options());
  auto c = s.client(token_);
  std::mt19937_64 rng(1234);
  const std::string valid = infer_body(random_input(1, 10), 1).dump();
  Tensor image = Tensor::zeros({28, 28, 1}, DType::u8);
  const std::string png = vision::encode_png(image);
  int answered = 0, server_errors = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string body;
    const int kind = int(rng() % 4);
    if (kind == 0) {  // random bytes
      body.resize(rng() % 512);
      for (auto& ch : body) ch = char(rng());
    } else {  // a valid JSON body or PNG with a few bytes changed, cut or repeated
      body = kind == 3 ? png : valid;
      const int edits = 1 + int(rng() % 8);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % body.size();
        switch (rng() % 3) {
          case 0:
            body[at] = char(rng());
            break;
          case 1:
            body.erase(at, rng() % 16);
            break;
          default:
            body.insert(at, body.substr(at, rng() % 32));
            break;
        }
        if (body.empty()) body.assign(1, '{');
      }
    }
    const bool image_path = kind == 3 || (kind == 0 && rng() % 2);
    auto r = c->Post(image_path ? "/v2/models/fmnist/classify" : "/v2/models/fmnist/infer", body,
                     image_path ? "image/png" : "application/json");
    ASSERT_TRUE(r) << "request " << i << ": " << httplib::to_string(r.error());
    ++answered;
    if (r->status >= 500 && ++server_errors <= 3)
      ADD_FAILURE() << "request " << i << " got " << r->status << ": " << r->body;
    if (r->status != 200) {
      json e = json::parse(r->body, nullptr, false);
      ASSERT_TRUE(e.is_object() && e.contains("error")) << r->status << " " << r->body;
    }
  }
  EXPECT_EQ(answered, 3000);
  EXPECT_EQ(server_errors, 0);
  const auto input = random_input(2, 11);
  auto ok = c->Post("/v2/models/fmnist/infer", infer_body(input, 2).dump(), "application/json");
  ASSERT_EQ(ok->status, 200) << ok->body;
  auto logits = json::parse(ok->body)["outputs"][0]["data"].get<std::vector<float>>();
  auto expected = reference_logits(input, 2);
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(logits[i], expected[i], 1e-4);
}

TEST_F(InferenceServerTest, ConcurrentRequestsAreBatchedAndCounted) {
  ServeOptions o = options();
  o.batch.max_batch = 16;
  o.batch.max_delay_ms = 20;
  RunningServer s(package(), o);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0}, batched{0};
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      auto c = s.client(token_);
      for (int i = 0; i < 4; ++i) {
        auto r = c->Post("/v2/models/fmnist/infer",
                         infer_body(random_input(1, t * 10 + i), 1).dump(), "application/json");
        if (r && r->status == 200) {
          ++ok;
          if (json::parse(r->body)["parameters"]["batch_size"].get<int>() > 1) ++batched;
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 64);
  EXPECT_GT(batched.load(), 0);
  auto m = s.client(token_)->Get("/metrics");
  ASSERT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("zenith_serve_requests_total{model=\"fmnist\",endpoint=\"infer\","
                         "status=\"200\"} 64"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("zenith_serve_request_seconds_count{model=\"fmnist\"} 64"),
            std::string::npos);
  EXPECT_NE(m->body.find("zenith_serve_batch_size_bucket"), std::string::npos);
  EXPECT_NE(m->body.find("zenith_serve_queue_seconds_count{model=\"fmnist\"} 64"),
            std::string::npos);
}

TEST_F(InferenceServerTest, FullQueueAnswers429AndSlowAnswers504) {
  {
    ServeOptions o = options();
    o.batch.max_batch = 1;
    o.batch.max_queue = 1;
    o.batch.max_delay_ms = 0;
    RunningServer s(package(), o);
    std::atomic<int> ok{0}, full{0}, other{0};
    const std::string body = infer_body(random_input(256, 1), 256).dump();
    // Bursts of 32 concurrent 256-sample requests against a queue of one: some must be refused.
    for (int burst = 0; burst < 5 && full == 0; ++burst) {
      std::vector<std::unique_ptr<httplib::Client>> clients;
      for (int t = 0; t < 32; ++t) {
        clients.push_back(s.client(token_));
        clients.back()->Get("/v2/health/live");  // connect (TLS handshake) before the burst
      }
      std::vector<std::thread> threads;
      for (int t = 0; t < 32; ++t)
        threads.emplace_back([&, t] {
          auto r = clients[size_t(t)]->Post("/v2/models/fmnist/infer", body, "application/json");
          if (r && r->status == 200)
            ++ok;
          else if (r && r->status == 429 && r->body.find("queue is full") != std::string::npos)
            ++full;
          else
            ++other;
        });
      for (auto& t : threads) t.join();
    }
    EXPECT_GT(ok.load(), 0);
    EXPECT_GT(full.load(), 0);
    EXPECT_EQ(other.load(), 0);
  }
  {
    ServeOptions o = options();
    o.timeout_s = 1e-6;
    RunningServer s(package(), o);
    // A 256-sample run takes milliseconds; the handler gives up after a microsecond.
    const std::string body = infer_body(random_input(256, 1), 256).dump();
    auto c = s.client(token_);
    int timed_out = 0;
    for (int i = 0; i < 3 && timed_out == 0; ++i) {
      auto r = c->Post("/v2/models/fmnist/infer", body, "application/json");
      ASSERT_TRUE(r);
      if (r->status == 504) {
        ++timed_out;
        expect_error(r, 504);
      } else {
        EXPECT_EQ(r->status, 200);
      }
    }
    EXPECT_EQ(timed_out, 1);
  }
}

TEST_F(InferenceServerTest, PlainHttpOnlyWhenAskedFor) {
  ServeOptions o = options();
  o.tls = false;
  RunningServer s(package(), o);
  EXPECT_EQ(s.server->url().rfind("http://", 0), 0u);
  auto r = s.client(token_)->Post("/v2/models/fmnist/infer",
                                  infer_body(random_input(1, 1), 1).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace zenith::serve
