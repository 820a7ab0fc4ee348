#include "serve/inference_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>

#include "data/image_codec.h"
#include "platform/deployments/deployment_store.h"
#include "platform/http/api_token.h"
#include "platform/http/http_guard.h"
#include "platform/http/reply.h"
#include "serve/image_header.h"
#include "serve/listener.h"
#include "serve/prometheus.h"
#include "serve/route_auth.h"
#include "zenith/autograd.h"
#include "zenith/data.h"

namespace zenith::serve {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// A request error: the status and message become the {"error": ...} response.
struct HttpError {
  int status;
  std::string message;
};

// Appends the numbers of a (possibly nested) JSON array; false on anything else.
bool flatten(const json& v, std::vector<double>& out, size_t limit) {
  if (v.is_array()) {
    for (const auto& e : v)
      if (!flatten(e, out, limit)) return false;
    return true;
  }
  if (!v.is_number() || out.size() >= limit) return false;
  out.push_back(v.get<double>());
  return true;
}

// The metrics endpoint a request path belongs to.
const char* endpoint_of(const std::string& path) {
  auto ends_with = [&](const char* tail) {
    const std::string t = tail;
    return path.size() >= t.size() && path.compare(path.size() - t.size(), t.size(), t) == 0;
  };
  if (path.rfind("/v2/models/", 0) != 0)
    return path.rfind("/v2/health", 0) == 0 ? "health" : "other";
  if (ends_with("/infer")) return "infer";
  if (ends_with("/classify")) return "classify";
  return "metadata";
}

// Set by a route's handler when it answered >= 400 itself (and counted it).
thread_local bool t_counted = false;

std::vector<double> softmax_row(const float* logits, int64_t k) {
  double m = -INFINITY;
  for (int64_t i = 0; i < k; ++i) m = std::max(m, double(logits[i]));
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += p[size_t(i)] = std::exp(double(logits[i]) - m);
  for (auto& x : p) x /= sum;
  return p;
}

}  // namespace

struct InferenceServer::Impl {
  std::string package_dir;
  ServeOptions options;
  PackageSpec spec;
  std::vector<nn::CellPtr> nets;  // one per replica
  PrometheusStats stats;          // what GET /metrics exposes
  std::unique_ptr<platform::TokenVerifier> tokens;
  std::unique_ptr<Batcher> batcher;
  std::unique_ptr<platform::GuardedServer> server;
  std::string cert;
  int bound_port = 0;
  std::vector<dataset::TransformPtr> preprocess;  // HWC uint8 image -> CHW float32
  std::atomic<bool> warmed{false};

  int64_t sample_numel() const { return spec.channels * spec.image_size * spec.image_size; }

  std::vector<float> run(int replica, const std::vector<float>& input, int64_t n, int64_t* width) {
    NoGradGuard no_grad;
    Tensor x = Tensor::from_vector(input, {n, spec.channels, spec.image_size, spec.image_size});
    Tensor y = nets[size_t(replica)]->forward(x).contiguous();
    ZENITH_CHECK(y.dim() == 2 && y.size(0) == n, "[serve] the model returned shape ",
                 shape_str(y.shape()), " for a batch of ", n);
    *width = y.size(1);
    const float* p = y.data<float>();
    return std::vector<float>(p, p + y.numel());
  }

  // The token check, before a body is read (the server's gate): only /v2/health/* is open.
  std::optional<platform::GateRefusal> authorize(const httplib::Request& req) {
    if (req.path.rfind("/v2/health/", 0) == 0) return std::nullopt;
    return authorize_service_request(req, *tokens, options.name, options.admin_token);
  }

  // The model named in the path (capture 1) and version (capture 2, optional) must be ours.
  void check_model(const httplib::Request& req) {
    const std::string name = req.matches[1].str();
    if (name != options.name)
      throw HttpError{
          404, "[serve] unknown model '" + name + "' (this service serves '" + options.name + "')"};
    if (req.matches.size() > 2 && req.matches[2].matched &&
        req.matches[2].str() != std::to_string(options.version))
      throw HttpError{404, "[serve] model '" + name + "' has no version '" + req.matches[2].str() +
                               "' here (serving version " + std::to_string(options.version) + ")"};
  }

  // Queues n samples and waits for their rows; throws HttpError 429/504/500.
  BatchResult predict(std::vector<float> input, int64_t n) {
    auto request = batcher->submit(std::move(input), n);
    if (!request)
      throw HttpError{429, "[serve] the request queue is full (" +
                               std::to_string(options.batch.max_queue) + " waiting); retry later"};
    auto future = request->promise.get_future();
    if (future.wait_for(std::chrono::duration<double>(options.timeout_s)) !=
        std::future_status::ready) {
      request->abandoned = true;
      throw HttpError{504, "[serve] no answer within the request timeout of " +
                               std::to_string(options.timeout_s) + " s"};
    }
    BatchResult result = future.get();
    if (!result.error.empty()) throw HttpError{500, result.error};
    return result;
  }

  json metadata() const {
    return {{"name", options.name},
            {"versions", {std::to_string(options.version)}},
            {"platform", "zenith"},
            {"inputs",
             {{{"name", "input"},
               {"datatype", "FP32"},
               {"shape", {-1, spec.channels, spec.image_size, spec.image_size}}}}},
            {"outputs",
             {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {-1, spec.num_classes}}},
              {{"name", "probabilities"}, {"datatype", "FP32"}, {"shape", {-1, spec.num_classes}}},
              {{"name", "class"}, {"datatype", "INT64"}, {"shape", {-1}}},
              {{"name", "label"}, {"datatype", "BYTES"}, {"shape", {-1}}}}},
            {"parameters",
             {{"arch", spec.arch},
              {"labels", spec.labels},
              {"dataset", spec.dataset},
              {"sha256", spec.sha256},
              {"preprocessing", spec.to_json()["preprocessing"]},
              {"uint8_input", "raw pixels in CHW order are rescaled and normalized"},
              {"max_batch_size", options.batch.max_batch}}}};
  }

  void infer(const httplib::Request& req, httplib::Response& res) {
    check_model(req);
    // flatten() and the parser's DOM recurse per level: 100k levels would overflow the stack.
    if (platform::nesting_depth(req.body) > platform::kMaxJsonDepth)
      throw HttpError{400, "[infer] the JSON body is nested deeper than " +
                               std::to_string(platform::kMaxJsonDepth) + " levels"};
    json body;
    try {
      body = json::parse(req.body);
    } catch (const json::exception& e) {
      throw HttpError{400, std::string("[infer] malformed JSON body: ") + e.what()};
    }
    if (!body.is_object() || !body.contains("inputs") || !body["inputs"].is_array())
      throw HttpError{400,
                      "[infer] the body must be {\"inputs\": [{\"name\", \"shape\", "
                      "\"datatype\", \"data\"}]}"};
    if (body["inputs"].size() != 1)
      throw HttpError{
          400, "[infer] expected exactly 1 input, got " + std::to_string(body["inputs"].size())};
    const json& in = body["inputs"][0];
    if (!in.is_object() || !in.contains("shape") || !in.contains("datatype") ||
        !in.contains("data"))
      throw HttpError{400, "[infer] the input needs \"shape\", \"datatype\" and \"data\""};
    if (!in["datatype"].is_string()) throw HttpError{400, "[infer] \"datatype\" must be a string"};
    const std::string dtype = in["datatype"];
    if (dtype != "FP32" && dtype != "UINT8")
      throw HttpError{400, "[infer] datatype '" + dtype +
                               "' is not supported (FP32: the "
                               "preprocessed input; UINT8: raw pixels)"};
    const int64_t c = spec.channels, s = spec.image_size;
    const std::string want = "[N, " + std::to_string(c) + ", " + std::to_string(s) + ", " +
                             std::to_string(s) + "] or [" + std::to_string(c) + ", " +
                             std::to_string(s) + ", " + std::to_string(s) + "]";
    std::vector<int64_t> shape;
    if (in["shape"].is_array())
      for (const auto& d : in["shape"]) {
        if (!d.is_number_integer()) {
          shape.clear();
          break;
        }
        shape.push_back(d.get<int64_t>());
      }
    if (shape.size() == 3) shape.insert(shape.begin(), 1);
    if (shape.size() != 4 || shape[1] != c || shape[2] != s || shape[3] != s)
      throw HttpError{400,
                      "[infer] shape " + in["shape"].dump() + " does not fit the model's " + want};
    const int64_t n = shape[0];
    if (n < 1 || n > options.max_request_samples)
      throw HttpError{400, "[infer] batch of " + std::to_string(n) + " samples; 1.." +
                               std::to_string(options.max_request_samples) + " per request"};
    std::vector<double> values;
    const size_t expected = size_t(n * sample_numel());
    values.reserve(expected);
    if (!flatten(in["data"], values, expected) || values.size() != expected)
      throw HttpError{400, "[infer] \"data\" must hold " + std::to_string(expected) +
                               " numbers for shape " + in["shape"].dump()};
    std::vector<float> input(values.size());
    if (dtype == "FP32") {
      for (size_t i = 0; i < values.size(); ++i) {
        if (!std::isfinite(float(values[i])))
          throw HttpError{400, "[infer] FP32 value out of range at index " + std::to_string(i)};
        input[i] = float(values[i]);
      }
    } else {
      // Raw pixels in CHW order: the same arithmetic as the training pipeline's transforms.
      const int64_t plane = s * s;
      for (size_t i = 0; i < values.size(); ++i) {
        const double v = values[i];
        if (v < 0 || v > 255 || v != std::floor(v))
          throw HttpError{400, "[infer] UINT8 value " + json(v).dump() + " at index " +
                                   std::to_string(i) + " is not an integer in 0..255"};
        const size_t ch = spec.mean.size() == 1 ? 0 : size_t((int64_t(i) / plane) % c);
        float x = float(v) * float(1.0 / 255.0);
        input[i] = float((x - spec.mean[ch]) / spec.std[ch]);
      }
    }
    BatchResult r = predict(std::move(input), n);
    json logits = json::array(), probs = json::array(), classes = json::array(),
         labels = json::array();
    for (int64_t i = 0; i < n; ++i) {
      const float* row = r.outputs.data() + i * r.width;
      auto p = softmax_row(row, r.width);
      const int64_t best = std::max_element(row, row + r.width) - row;
      for (int64_t k = 0; k < r.width; ++k) {
        logits.push_back(row[k]);
        probs.push_back(float(p[size_t(k)]));
      }
      classes.push_back(best);
      labels.push_back(best < int64_t(spec.labels.size()) ? spec.labels[size_t(best)]
                                                          : std::to_string(best));
    }
    json out = {
        {"model_name", options.name},
        {"model_version", std::to_string(options.version)},
        {"outputs",
         {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {n, r.width}}, {"data", logits}},
          {{"name", "probabilities"},
           {"datatype", "FP32"},
           {"shape", {n, r.width}},
           {"data", probs}},
          {{"name", "class"}, {"datatype", "INT64"}, {"shape", {n}}, {"data", classes}},
          {{"name", "label"}, {"datatype", "BYTES"}, {"shape", {n}}, {"data", labels}}}}};
    if (body.contains("id")) out["id"] = body["id"];
    out["parameters"] = {{"batch_size", r.batch_size}, {"queue_ms", r.queue_seconds * 1e3}};
    platform::reply_json(res, 200, out);
  }

  void classify(const httplib::Request& req, httplib::Response& res) {
    check_model(req);
    const std::string& b = req.body;
    const bool png = b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
    const bool jpeg = b.size() >= 3 && b.compare(0, 3, "\xff\xd8\xff") == 0;
    if (!png && !jpeg)
      throw HttpError{415, "[classify] the body is not a PNG or JPEG image (" +
                               std::to_string(b.size()) + " bytes)"};
    int64_t top_k = 5;
    if (req.has_param("top_k")) {
      try {
        top_k = std::stoll(req.get_param_value("top_k"));
      } catch (...) {
        top_k = 0;
      }
      if (top_k < 1) throw HttpError{400, "[classify] top_k must be a positive integer"};
    }
    top_k = std::min(top_k, spec.num_classes);
    // The size the header declares, before a byte is decoded: a 400 kB PNG can inflate to 20000
    // x 20000 pixels (and the float copies after it to gigabytes).
    const auto size = image_size(b);
    if (!size || size->width <= 0 || size->height <= 0)
      throw HttpError{400, "[classify] cannot read the image's size from its header"};
    if (size->width * size->height > options.max_image_pixels)
      throw HttpError{413, "[classify] the image is " + std::to_string(size->width) + "x" +
                               std::to_string(size->height) + " pixels, over the limit of " +
                               std::to_string(options.max_image_pixels) + " pixels"};
    Tensor image;
    try {
      image = vision::decode_image(b, png ? "PNG body" : "JPEG body", int(spec.channels));
      std::mt19937_64 rng(0);
      if (image.size(0) != spec.image_size || image.size(1) != spec.image_size)
        image = vision::Resize({spec.image_size, spec.image_size})->apply(image, rng);
      for (const auto& t : preprocess) image = t->apply(image, rng);
    } catch (const std::exception& e) {
      throw HttpError{400, std::string("[classify] cannot decode the image: ") + e.what()};
    }
    const float* p = image.contiguous().data<float>();
    BatchResult r = predict(std::vector<float>(p, p + image.numel()), 1);
    auto probs = softmax_row(r.outputs.data(), r.width);
    std::vector<int64_t> order(size_t(r.width));
    for (int64_t i = 0; i < r.width; ++i) order[size_t(i)] = i;
    // Ties keep the lower class first, like argmax.
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) {
      return r.outputs[size_t(a)] > r.outputs[size_t(c)];
    });
    json predictions = json::array();
    for (int64_t i = 0; i < top_k; ++i) {
      const int64_t k = order[size_t(i)];
      predictions.push_back(
          {{"label", spec.labels[size_t(k)]}, {"class", k}, {"probability", probs[size_t(k)]}});
    }
    platform::reply_json(res, 200,
                         {{"model_name", options.name},
                          {"model_version", std::to_string(options.version)},
                          {"predictions", predictions}});
  }

  // Wraps a handler: HttpError and other exceptions become {"error": ...}; every answer is
  // counted in the metrics under `endpoint`.
  template <typename Fn>
  httplib::Server::Handler handle(const std::string& endpoint, Fn fn) {
    return [this, endpoint, fn](const httplib::Request& req, httplib::Response& res) {
      const auto start = Clock::now();
      try {
        fn(req, res);
      } catch (const HttpError& e) {
        if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
        platform::reply_error(res, e.status, e.message);
      } catch (const std::exception& e) {
        platform::reply_error(res, 500, std::string("[serve] internal error: ") + e.what());
      }
      stats.request(endpoint, res.status,
                    std::chrono::duration<double>(Clock::now() - start).count());
      t_counted = res.status >= 400;
    };
  }

  void routes() {
    auto& s = *server;
    s.set_keep_alive_max_count(100000);
    s.set_tcp_nodelay(true);  // small responses: no Nagle / delayed-ACK stalls
    s.set_read_timeout(30, 0);
    s.set_write_timeout(30, 0);
    s.set_gate([this](const httplib::Request& req) { return authorize(req); });
    // Replies no route made (refused by the gate or the limits, unparsable, no such endpoint)
    // are counted too.
    s.set_error_hook([this](const httplib::Request& req, const httplib::Response& res) {
      if (!t_counted) stats.request(endpoint_of(req.path), res.status, 0);
      t_counted = false;
    });
    s.Get("/v2/health/live", handle("health", [](auto&, auto& res) {
            platform::reply_json(res, 200, {{"live", true}});
          }));
    s.Get("/v2/health/ready", handle("health", [](auto&, auto& res) {
            platform::reply_json(res, 200, {{"ready", true}});
          }));
    s.Get("/v2", handle("metadata", [](auto&, auto& res) {
            platform::reply_json(
                res, 200,
                {{"name", "zenith"}, {"version", "0.1.0"}, {"extensions", json::array()}});
          }));
    const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
    s.Get(model, handle("metadata", [this](auto& req, auto& res) {
            check_model(req);
            platform::reply_json(res, 200, metadata());
          }));
    s.Get(model + "/ready", handle("metadata", [this](auto& req, auto& res) {
            check_model(req);
            platform::reply_json(res, 200, {{"name", options.name}, {"ready", true}});
          }));
    s.Post(model + "/infer", handle("infer", [this](auto& req, auto& res) { infer(req, res); }));
    s.Post(model + "/classify",
           handle("classify", [this](auto& req, auto& res) { classify(req, res); }));
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(stats.text(options.name, batcher->queue_depth()),
                      "text/plain; version=0.0.4");
    });
  }
};

InferenceServer::InferenceServer(const std::string& package_dir, ServeOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.package_dir = package_dir;
  m.options = std::move(options);
  m.spec = read_package(package_dir);
  if (m.options.name.empty()) m.options.name = m.spec.name;
  ZENITH_CHECK(!m.options.token_db.empty(), "[serve] no token store given");
  m.tokens = std::make_unique<platform::TokenVerifier>(m.options.token_db, m.options.name);
  m.options.batch.replicas = std::max(1, m.options.batch.replicas);
  for (int r = 0; r < m.options.batch.replicas; ++r)
    m.nets.push_back(load_network(package_dir, m.spec));
  m.preprocess = {vision::Rescale(1.0 / 255.0, 0.0), vision::Normalize(m.spec.mean, m.spec.std),
                  vision::HWC2CHW()};
  m.batcher = std::make_unique<Batcher>(
      m.options.batch, m.sample_numel(),
      [&m](int replica, const std::vector<float>& in, int64_t n, int64_t* width) {
        return m.run(replica, in, n, width);
      },
      [&m](int samples, const std::vector<double>& queue_s) {
        if (!m.warmed) return;  // warm-up runs are not traffic
        m.stats.batch(samples);
        for (double q : queue_s) m.stats.queue_time(q);
      });
  // One run per batch size up to max_batch, through the batcher's own worker threads: oneDNN
  // builds (JIT-compiles) primitives per shape, which would otherwise stall the first requests
  // of each new batch size.
  for (int n = 1; n <= std::min(m.options.batch.max_batch, 256); ++n) {
    auto warm = m.batcher->submit(std::vector<float>(size_t(n * m.sample_numel()), 0.f), n);
    if (warm) warm->promise.get_future().get();
  }
  m.warmed = true;
  ListenerOptions listener{m.options.host,   m.options.max_body_bytes, m.options.http_threads,
                           m.options.tls,    m.options.cert,           m.options.key,
                           m.options.tls_dir};
  m.server = make_listener(listener);
  m.options.cert = listener.cert;
  m.options.key = listener.key;
  if (m.options.tls) m.cert = listener.cert;
  m.routes();
}

InferenceServer::~InferenceServer() {
  stop();
  impl_->batcher.reset();  // workers stop before the networks go
}

int InferenceServer::bind() {
  Impl& m = *impl_;
  if (m.options.port == 0) {
    m.bound_port = m.server->bind_to_any_port(m.options.host);
    ZENITH_CHECK(m.bound_port > 0, "[serve] cannot bind ", m.options.host);
  } else {
    ZENITH_CHECK(m.server->bind_to_port(m.options.host, m.options.port),
                 "[serve] cannot listen on ", m.options.host, ":", m.options.port,
                 " (in use? try --port)");
    m.bound_port = m.options.port;
  }
  return m.bound_port;
}

void InferenceServer::serve() { impl_->server->listen_after_bind(); }

void InferenceServer::stop() {
  if (impl_->server && impl_->server->is_running()) impl_->server->stop();
}

std::string InferenceServer::url() const {
  std::string host = impl_->options.host;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  return std::string(impl_->options.tls ? "https://" : "http://") + host + ":" +
         std::to_string(impl_->bound_port);
}

const PackageSpec& InferenceServer::package() const { return impl_->spec; }
const ServeOptions& InferenceServer::options() const { return impl_->options; }
std::string InferenceServer::cert_path() const { return impl_->cert; }

}  // namespace zenith::serve
