#include "serve/llm/http_server.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/atomic_file.h"
#include "models/llama_quant.h"
#include "platform/http/api_token.h"
#include "platform/http/reply.h"
#include "serve/listener.h"
#include "serve/llm/http_server_impl.h"
#include "serve/llm/openai_response.h"
#include "serve/llm_package.h"
#include "serve/route_auth.h"
#include "zenith/context.h"
#include "zenith/gguf.h"
#include "zenith/llama.h"
#include "zenith/quant.h"

namespace zenith::serve::llm {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Set by a route's handler when it counted its answer itself.
thread_local bool t_counted = false;

bool admin_path(const std::string& path) {
  return path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter";
}

// Whether a client may retry a 4xx unchanged: only a timeout, a conflict or a full queue.
bool retryable(int status) { return status == 408 || status == 409 || status == 429; }

// A dtype as --dtype and --kv-cache-dtype name it (f32, bf16, f16).
std::string dtype_flag_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    default:
      return dtype_name(dtype);
  }
}

}  // namespace

void reply_api_error(httplib::Response& res, const ApiError& error) {
  if (error.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  platform::reply_json(res, error.status, error_body(error));
}

std::string new_request_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "req_%016llx%08llx", (unsigned long long)rng(),
                (unsigned long long)(rng() & 0xffffffffu));
  return buf;
}

void LlmServer::Impl::count(const std::string& endpoint, int status, double seconds) {
  std::lock_guard lock(http_mutex);
  ++http.answered[{endpoint, status}];
  http.latency_sum += seconds;
  ++http.latency_count;
}

std::optional<platform::GateRefusal> LlmServer::Impl::authorize(const httplib::Request& req) {
  if (req.path == "/health") return std::nullopt;
  if (!admin_path(req.path))
    return authorize_service_request(req, *tokens, options.name, options.admin_token);
  const auto secret = bearer_secret(req);
  if (!secret) return missing_token(options.name);
  if (is_platform_token(*secret, options.admin_token)) return std::nullopt;
  auto record = tokens->find(*secret);
  if (!record) return platform::GateRefusal{401, "[serve] invalid, expired or revoked token"};
  if (record->role != "admin")
    return platform::GateRefusal{403,
                                 "[serve] adapters are loaded and unloaded with a platform "
                                 "admin token (`zenith token create --role admin`)"};
  return std::nullopt;
}

// vLLM's model card (id, root, parent, max_model_len) and, under "zenith", how the engine runs:
// read-only settings a client may tune its requests by (nothing secret: no paths, no tokens).
void LlmServer::Impl::models(httplib::Response& res, const std::string& only) {
  const EngineOptions& e = options.engine;
  const EngineStats stats = engine->stats();
  const json engine_options = {{"max_batched_tokens", e.max_batched_tokens},
                               {"max_step_cost", e.max_step_cost},
                               {"max_running", e.max_running},
                               {"max_waiting", e.max_waiting},
                               {"kv_cache_memory", e.kv_cache_bytes},
                               {"kv_cache_dtype", dtype_flag_name(e.kv_cache_dtype)},
                               {"kv_cache_blocks", stats.kv_blocks},
                               {"block_size", stats.block_size},
                               {"prefix_caching", e.prefix_caching},
                               {"threads", threads},
                               {"dtype", weight_dtype}};
  auto card = [&](const std::string& id, const std::string& root, const json& parent) {
    return json{{"id", id},
                {"object", "model"},
                {"created", created},
                {"owned_by", "zenith"},
                {"root", root},
                {"parent", parent},
                {"max_model_len", engine->max_model_len()},
                {"zenith", engine_options}};
  };
  json data = json::array({card(options.name, root_name, nullptr)});
  std::lock_guard lock(adapters_mutex);
  for (const auto& [name, dir] : adapter_dirs) data.push_back(card(name, dir, options.name));
  if (only.empty()) return platform::reply_json(res, 200, {{"object", "list"}, {"data", data}});
  for (const auto& m : data)
    if (m["id"] == only) return platform::reply_json(res, 200, m);
  throw ApiError{404, "The model '" + only + "' does not exist", "model", "model_not_found"};
}

void LlmServer::Impl::load_adapter(const httplib::Request& req, httplib::Response& res) {
  auto body = platform::parse_json_body(req.body, res, "serve");
  if (!body) return;
  const json name = body->value("lora_name", json()), path = body->value("lora_path", json());
  if (!name.is_string() || name.get<std::string>().empty())
    throw ApiError{400, "'lora_name' must be a non-empty string", "lora_name", ""};
  if (!path.is_string() || path.get<std::string>().empty())
    throw ApiError{400, "'lora_path' must be an adapter directory", "lora_path", ""};
  if (name == options.name)
    throw ApiError{400, "'lora_name' is the base model's name", "lora_name", ""};
  try {
    engine->add_adapter(name, path);
  } catch (const std::exception& e) {
    throw ApiError{400, std::string("cannot load the adapter: ") + e.what(), "lora_path", ""};
  }
  {
    std::lock_guard lock(adapters_mutex);
    adapter_dirs[name] = path;
    runtime_adapters[name] = path;
    save_runtime_adapters();
  }
  platform::reply_json(res, 200, {{"status", "ok"}, {"lora_name", name}, {"lora_path", path}});
}

void LlmServer::Impl::unload_adapter(const httplib::Request& req, httplib::Response& res) {
  auto body = platform::parse_json_body(req.body, res, "serve");
  if (!body) return;
  const json name = body->value("lora_name", json());
  if (!name.is_string()) throw ApiError{400, "'lora_name' must be a string", "lora_name", ""};
  if (!engine->remove_adapter(name))
    throw ApiError{404, "no adapter named '" + name.get<std::string>() + "'", "lora_name",
                   "model_not_found"};
  {
    std::lock_guard lock(adapters_mutex);
    adapter_dirs.erase(name);
    if (runtime_adapters.erase(name)) save_runtime_adapters();
  }
  platform::reply_json(res, 200, {{"status", "ok"}, {"lora_name", name}});
}

void LlmServer::Impl::save_runtime_adapters() {
  if (options.adapters_file.empty()) return;
  fs::create_directories(fs::path(options.adapters_file).parent_path());
  core::write_file_atomic(options.adapters_file, json(runtime_adapters).dump(2) + "\n", 0600);
}

void LlmServer::Impl::load_runtime_adapters() {
  if (options.adapters_file.empty() || !fs::exists(options.adapters_file)) return;
  std::ifstream in(options.adapters_file);
  const json kept = json::parse(in, nullptr, false);
  if (!kept.is_object()) {
    std::fprintf(stderr, "[serve] %s is not a JSON object of adapters; ignored\n",
                 options.adapters_file.c_str());
    return;
  }
  for (const auto& [name, dir] : kept.items()) {
    if (!dir.is_string() || name == options.name || adapter_dirs.count(name)) continue;
    try {  // one that no longer loads (its directory gone, another base model) is left out
      engine->add_adapter(name, dir.get<std::string>());
      adapter_dirs[name] = runtime_adapters[name] = dir.get<std::string>();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[serve] adapter %s (loaded at run time before) left out: %s\n",
                   name.c_str(), e.what());
    }
  }
}

std::string LlmServer::Impl::metrics_text() {
  HttpCounts counts;
  {
    std::lock_guard lock(http_mutex);
    counts = http;
  }
  return llm::metrics_text(options.name, engine->stats(), counts);
}

std::shared_ptr<const TokenBytes> LlmServer::Impl::token_bytes() {
  std::lock_guard lock(vocab_mutex);
  if (!vocab) vocab = TokenBytes::from_tokenizer(*tokenizer);
  return vocab;
}

void LlmServer::Impl::routes() {
  auto& s = *server;
  s.set_keep_alive_max_count(100000);
  s.set_tcp_nodelay(true);
  s.set_read_timeout(30, 0);
  s.set_write_timeout(30, 0);
  s.set_gate([this](const httplib::Request& req) { return authorize(req); });
  // Every error, the listener's own refusals ({"error": "..."}) included, in OpenAI's envelope
  // (before httplib compresses it), counted when no route did.
  s.set_error_hook([this](const httplib::Request& req, httplib::Response& res) {
    if (!t_counted)
      count(req.path.rfind("/v1/", 0) == 0 ? req.path.substr(4) : "other", res.status, 0);
    t_counted = false;
    json body = json::parse(res.body, nullptr, false);
    if (body.is_object() && body.contains("error") && body["error"].is_string()) {
      ApiError e{res.status, body["error"].get<std::string>(), "", ""};
      res.set_content(platform::json_text(error_body(e)) + "\n", "application/json");
    }
  });
  // Every answer leaves with a request id.
  s.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.has_header("x-request-id")) res.set_header("x-request-id", new_request_id());
    if (res.status >= 400 && res.status < 500 && !retryable(res.status))
      res.set_header("x-should-retry", "false");
  });
  auto handle = [this](const std::string& endpoint, auto fn) {
    return [this, endpoint, fn](const httplib::Request& req, httplib::Response& res) {
      const auto start = Clock::now();
      res.set_header("x-request-id", new_request_id());
      try {
        fn(req, res);
      } catch (const ApiError& e) {
        reply_api_error(res, e);
      } catch (const std::exception& e) {
        reply_api_error(res, {500, std::string("[serve] internal error: ") + e.what(), "", ""});
      }
      count(endpoint, res.status, std::chrono::duration<double>(Clock::now() - start).count());
      t_counted = res.status >= 400;
    };
  };
  s.Get("/health", handle("health", [](auto&, auto& res) {
          platform::reply_json(res, 200, {{"status", "ok"}});
        }));
  s.Get("/v1/models", handle("models", [this](auto&, auto& res) { models(res); }));
  s.Get("/v1/models/([^/]+)",
        handle("models", [this](auto& req, auto& res) { models(res, req.matches[1].str()); }));
  s.Post("/v1/chat/completions",
         handle("chat_completions", [this](auto& req, auto& res) { complete(req, res, true); }));
  s.Post("/v1/completions",
         handle("completions", [this](auto& req, auto& res) { complete(req, res, false); }));
  s.Post("/v1/load_lora_adapter",
         handle("adapters", [this](auto& req, auto& res) { load_adapter(req, res); }));
  s.Post("/v1/unload_lora_adapter",
         handle("adapters", [this](auto& req, auto& res) { unload_adapter(req, res); }));
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
}

namespace {

// The model in `path` (a directory or a GGUF file) in `dtype` (LlmServeOptions::dtype).
std::shared_ptr<models::Llama> load_model(const std::string& path, const std::string& dtype) {
  const bool blocks = dtype == "q8_0" || dtype == "q4_0" || dtype == "q4_k";
  ZENITH_CHECK(dtype.empty() || blocks || dtype == "f32" || dtype == "bf16" || dtype == "f16",
               "[serve] --dtype: expected f32, bf16, f16, q8_0, q4_0 or q4_k, got '", dtype, "'");
  auto model = dtype.empty() || blocks
                   ? models::Llama::from_pretrained(path)
                   : models::Llama::from_pretrained(path, dtype_from_name(dtype));
  if (blocks) model->quantize(quant_from_name(dtype));
  models::pack_for_inference(*model);  // quantized weights held once (interleaved)
  return model;
}

// /v1/models' "root" of the base model: the model it was loaded from, as vLLM's is the path it
// serves; for an LLM package (a deployed version) the model directory it was made from.
std::string model_root(const std::string& model_dir) {
  const fs::path path = fs::path(model_dir).lexically_normal();
  const fs::path package = fs::is_directory(path) ? path : path.parent_path();  // or its GGUF
  if (is_llm_package(package.string())) {
    std::ifstream in(package / "package.json");
    const json spec = json::parse(in, nullptr, false);
    if (spec.is_object() && spec.value("source", json()).is_string()) return spec["source"];
  }
  return path.has_filename() ? path.string() : path.parent_path().string();
}

}  // namespace

LlmServer::LlmServer(const std::string& model_dir, LlmServeOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.model_dir = model_dir;
  m.options = std::move(options);
  const bool gguf = models::is_gguf_file(model_dir);  // a llama.cpp file: name.gguf -> "name"
  if (m.options.name.empty())
    m.options.name =
        gguf ? fs::path(model_dir).stem() : fs::path(model_dir).lexically_normal().filename();
  if (m.options.name.empty()) m.options.name = fs::path(model_dir).parent_path().filename();
  ZENITH_CHECK(!m.options.token_db.empty(), "[serve] no token store given");
  m.tokens = std::make_unique<platform::TokenVerifier>(m.options.token_db, m.options.name);
  m.created = int64_t(std::time(nullptr));
  auto model = load_model(model_dir, m.options.dtype);
  model->eval();
  m.weight_dtype =
      m.options.dtype.empty() ? dtype_flag_name(model->weight_dtype()) : m.options.dtype;
  m.root_name = model_root(model_dir);
  m.tokenizer = models::find_model_tokenizer(model_dir);
  ZENITH_CHECK(
      m.tokenizer != nullptr, "[serve] ", model_dir,
      " has no tokenizer (tokenizer.json or tokenizer.model): an OpenAI service needs one");
  if (!m.options.chat_template.empty() || !m.tokenizer->chat_template().empty())
    m.chat_template = text::ChatTemplate::for_tokenizer(*m.tokenizer, m.options.chat_template);
  m.engine = std::make_unique<Engine>(model, m.tokenizer, m.options.engine);
  m.threads = context::get_num_threads();  // the engine computes with its creator's count
  for (const auto& [name, dir] : m.options.adapters) {
    ZENITH_CHECK(name != m.options.name, "[serve] adapter name '", name,
                 "' is the base model's name");
    m.engine->add_adapter(name, dir);
    m.adapter_dirs[name] = dir;
  }
  m.load_runtime_adapters();
  ListenerOptions listener{m.options.host,   m.options.max_body_bytes, m.options.http_threads,
                           m.options.tls,    m.options.cert,           m.options.key,
                           m.options.tls_dir};
  m.server = make_listener(listener);
  m.options.cert = listener.cert;
  m.options.key = listener.key;
  if (m.options.tls) m.cert = listener.cert;
  m.routes();
}

LlmServer::~LlmServer() {
  stop();
  impl_->engine.reset();
}

int LlmServer::bind() {
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

void LlmServer::serve() { impl_->server->listen_after_bind(); }

void LlmServer::stop() {
  impl_->stopping = true;
  if (impl_->server && impl_->server->is_running()) impl_->server->stop();
}

std::string LlmServer::url() const {
  std::string host = impl_->options.host;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  return std::string(impl_->options.tls ? "https://" : "http://") + host + ":" +
         std::to_string(impl_->bound_port);
}

std::string LlmServer::cert_path() const { return impl_->cert; }
const LlmServeOptions& LlmServer::options() const { return impl_->options; }
Engine& LlmServer::engine() { return *impl_->engine; }

}  // namespace zenith::serve::llm
