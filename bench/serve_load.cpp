// Load on the inference service over loopback HTTPS: `zenith serve` runs as its own process and
// this program's client threads (one keep-alive connection each) post KServe v2 infer requests
// for a fixed time at each concurrency, with dynamic batching on (max batch 32) and off (1).
// Reports requests/s, p50/p99 latency, errors and the mean batch size (from the service's
// /metrics), then a soak run whose resident memory is read before and after.
//
//   serve_load [--zenith PATH] [--package DIR] [--duration S] [--soak S] [--concurrency 1,16,64]
//              [--max-batch 32] [--max-delay-ms 5] [--samples N]
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "platform/deployments/deployment_store.h"
#include "serve/package.h"
#include "zenith/zenith.h"

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

long rss_kib(pid_t pid) {
  std::istringstream lines(read_all("/proc/" + std::to_string(pid) + "/status"));
  for (std::string l; std::getline(lines, l);)
    if (l.rfind("VmRSS:", 0) == 0) return std::atol(l.c_str() + 6);
  return -1;
}

// Sum and count of zenith_serve_batch_size from /metrics.
std::pair<double, double> batch_totals(httplib::Client& client) {
  auto r = client.Get("/metrics");
  for (int retry = 0; retry < 5 && (!r || r->status != 200); ++retry) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    r = client.Get("/metrics");
  }
  if (!r || r->status != 200)
    throw std::runtime_error("[serve_load] cannot read the service's /metrics: " +
                             (r ? std::to_string(r->status) : httplib::to_string(r.error())));
  double sum = 0, count = 0;
  std::istringstream lines(r->body);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("zenith_serve_batch_size_sum", 0) == 0)
      sum = std::atof(l.substr(l.rfind(' ')).c_str());
    if (l.rfind("zenith_serve_batch_size_count", 0) == 0)
      count = std::atof(l.substr(l.rfind(' ')).c_str());
  }
  return {sum, count};
}

struct Service {
  pid_t pid = 0;
  std::string url, cert;
  ~Service() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
};

std::unique_ptr<Service> start_service(const std::string& zenith, const std::string& package,
                                       const std::string& data, int max_batch, double delay_ms) {
  auto s = std::make_unique<Service>();
  const std::string port_file = data + "/port";
  fs::remove(port_file);
  std::vector<std::string> args = {zenith,
                                   "serve",
                                   package,
                                   "--name",
                                   "bench",
                                   "--port",
                                   "0",
                                   "--port-file",
                                   port_file,
                                   "--data",
                                   data,
                                   "--managed",
                                   "--max-batch",
                                   std::to_string(max_batch),
                                   "--max-delay-ms",
                                   std::to_string(delay_ms),
                                   "--max-queue",
                                   "1024"};
  std::fflush(stdout);  // or the child's freopen writes our buffered lines a second time
  s->pid = fork();
  if (s->pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    freopen((data + "/service.log").c_str(), "a", stdout);
    freopen((data + "/service.log").c_str(), "a", stderr);
    execv(zenith.c_str(), argv.data());
    _exit(127);
  }
  for (int i = 0; i < 600; ++i) {
    int port = std::atoi(read_all(port_file).c_str());
    if (port > 0) {
      s->url = "https://127.0.0.1:" + std::to_string(port);
      s->cert = data + "/tls/cert.pem";
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("[serve_load] the service did not start: " +
                           read_all(data + "/service.log"));
}

std::unique_ptr<httplib::Client> client_for(const Service& s, const std::string& token) {
  auto c = std::make_unique<httplib::Client>(s.url);
  c->enable_server_certificate_verification(true);
  c->set_ca_cert_path(s.cert.c_str());
  c->set_bearer_token_auth(token);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  c->set_connection_timeout(60);
  c->set_read_timeout(60);
  return c;
}

struct RunResult {
  double seconds = 0;
  long requests = 0, errors = 0;
  double p50_ms = 0, p99_ms = 0, mean_batch = 0;
};

RunResult drive(const Service& s, const std::string& token, int concurrency, double duration_s,
                const std::vector<std::string>& bodies) {
  auto metrics_client = client_for(s, token);
  auto before = batch_totals(*metrics_client);
  std::atomic<bool> stop{false};
  std::atomic<long> errors{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(concurrency));
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int t = 0; t < concurrency; ++t)
    threads.emplace_back([&, t] {
      auto c = client_for(s, token);
      size_t i = size_t(t);
      while (!stop) {
        const auto t0 = Clock::now();
        auto r = c->Post("/v2/models/bench/infer", bodies[i++ % bodies.size()], "application/json");
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (!r || r->status != 200)
          ++errors;
        else
          latencies[size_t(t)].push_back(ms);
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(duration_s));
  stop = true;
  for (auto& t : threads) t.join();
  RunResult out;
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  out.requests = long(all.size());
  out.errors = errors;
  if (!all.empty()) {
    out.p50_ms = all[all.size() / 2];
    out.p99_ms = all[std::min(all.size() - 1, size_t(double(all.size()) * 0.99))];
  }
  auto after = batch_totals(*metrics_client);
  if (after.second > before.second)
    out.mean_batch = (after.first - before.first) / (after.second - before.second);
  return out;
}

}  // namespace

int run(int argc, char** argv) {
  std::string zenith = ZENITH_BINARY, package, concurrency_list = "1,16,64", arch = "seedcnn";
  double duration = 10, soak = 300, delay_ms = 5;
  int max_batch = 32, samples = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("[serve_load] " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--zenith")
      zenith = next();
    else if (a == "--package")
      package = next();
    else if (a == "--duration")
      duration = std::stod(next());
    else if (a == "--soak")
      soak = std::stod(next());
    else if (a == "--concurrency")
      concurrency_list = next();
    else if (a == "--max-batch")
      max_batch = std::stoi(next());
    else if (a == "--max-delay-ms")
      delay_ms = std::stod(next());
    else if (a == "--samples")
      samples = std::stoi(next());
    else if (a == "--arch")
      arch = next();
    else {
      std::fprintf(
          stderr,
          "usage: serve_load [--zenith PATH] [--package DIR] [--duration S] "
          "[--soak S (0: none)] [--concurrency 1,16,64] [--max-batch 32] "
          "[--max-delay-ms 5] [--samples N per request] [--arch seedcnn|lenet|resnet18]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  const std::string work =
      fs::temp_directory_path() / ("zenith_serve_load_" + std::to_string(getpid()));
  fs::create_directories(work);
  if (package.empty()) {
    // A randomly initialised zoo model: the speed does not depend on the weights.
    zenith::manual_seed(1);
    const std::string dataset = arch == "resnet18" ? "cifar10" : "fashion-mnist";
    const auto& info = zenith::dataset::dataset_info(dataset);
    auto net = zenith::models::create(arch, info.channels, info.image_size, info.num_classes);
    zenith::io::save_checkpoint(work + "/ckpt.safetensors", *net, nullptr,
                                {{"config", json({{"model", arch}, {"dataset", dataset}}).dump()}});
    zenith::serve::write_package(work + "/ckpt.safetensors", work + "/pkg", "bench");
    package = work + "/pkg";
  }
  const auto spec = zenith::serve::read_package(package);
  const int64_t sample = spec.channels * spec.image_size * spec.image_size;
  const std::string token =
      zenith::platform::DeploymentStore(work + "/zenith.db").create_token("bench").second;
  std::vector<std::string> bodies;
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> pixel(0, 255);
  for (int b = 0; b < 16; ++b) {
    std::vector<int> data(size_t(samples * sample));
    for (auto& v : data) v = pixel(rng);
    bodies.push_back(
        json({{"inputs",
               {{{"name", "input"},
                 {"shape", {int64_t(samples), spec.channels, spec.image_size, spec.image_size}},
                 {"datatype", "UINT8"},
                 {"data", data}}}}})
            .dump());
  }
  std::vector<int> levels;
  for (std::stringstream ss(concurrency_list); ss.good();) {
    std::string v;
    std::getline(ss, v, ',');
    if (!v.empty()) levels.push_back(std::stoi(v));
  }
  std::printf(
      "serve_load: %s %lldx%lldx%lld, %d sample(s)/request (UINT8 JSON, %zu bytes), "
      "HTTPS keep-alive, %g s per run, %u cores shared by client and service, load %s\n",
      spec.arch.c_str(), (long long)spec.channels, (long long)spec.image_size,
      (long long)spec.image_size, samples, bodies[0].size(), duration,
      std::thread::hardware_concurrency(), read_all("/proc/loadavg").substr(0, 14).c_str());
  std::printf("\n| batching | concurrency | req/s | p50 ms | p99 ms | errors | mean batch |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  std::map<std::pair<int, int>, double> rates;
  for (int batching : {max_batch, 1}) {
    auto service = start_service(zenith, package, work, batching, delay_ms);
    drive(*service, token, 4, 1.0, bodies);  // warm-up: connections, oneDNN primitives
    for (int c : levels) {
      RunResult r = drive(*service, token, c, duration, bodies);
      rates[{batching, c}] = double(r.requests) / r.seconds;
      std::printf("| %s | %d | %.0f | %.1f | %.1f | %ld | %.2f |\n",
                  batching > 1 ? ("on (max " + std::to_string(batching) + ")").c_str() : "off (1)",
                  c, double(r.requests) / r.seconds, r.p50_ms, r.p99_ms, r.errors, r.mean_batch);
      std::fflush(stdout);
    }
  }
  for (int c : levels)
    if (rates[{1, c}] > 0)
      std::printf("\nconcurrency %d: batching on / off = %.2fx", c,
                  rates[{max_batch, c}] / rates[{1, c}]);
  std::printf("\n");
  if (soak > 0) {
    auto service = start_service(zenith, package, work, max_batch, delay_ms);
    drive(*service, token, 64, 2.0, bodies);  // warm-up
    const long before = rss_kib(service->pid);
    RunResult r = drive(*service, token, 64, soak, bodies);
    const long after = rss_kib(service->pid);
    std::printf(
        "\nsoak: %g s at concurrency 64 with batching: %ld requests, %.0f req/s, p99 %.1f "
        "ms, %ld errors; service RSS %.1f MiB before, %.1f MiB after (%+.1f MiB)\n",
        soak, r.requests, double(r.requests) / r.seconds, r.p99_ms, r.errors, before / 1024.0,
        after / 1024.0, (after - before) / 1024.0);
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // after the service processes were stopped
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
