// `zenith serve PACKAGE`: one model package (or a checkpoint, packaged on the way) as an HTTPS
// inference service in the foreground, with no job server. `zenith server` runs the same
// command for each deployed service (--managed). An LLM (a Hugging Face model directory, or an
// LLM package from `zenith deploy`) is served with OpenAI's API (serve/llm/http_server.h),
// its adapters (--adapter NAME=DIR) as further models.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/client.h"
#include "cli/command.h"
#include "cli/stop_signal.h"
#include "platform/deployments/deployment_store.h"
#include "platform/http/api_token.h"
#include "platform/jobs/quantity.h"
#include "serve/inference_server.h"
#include "serve/llm/http_server.h"
#include "serve/llm_package.h"
#include "zenith/context.h"
#include "zenith/gguf.h"

namespace zenith::cli {
namespace {

namespace fs = std::filesystem;

struct LlmFlags {
  std::vector<std::string> adapters;  // NAME=DIR
  std::string kv_cache_memory = "256Mi", chat_template, dtype;
  std::string kv_cache_dtype = "auto";  // auto (= f32), f32, bf16, f16
  int threads = 0;
  serve::llm::EngineOptions engine;
};

// Prints the service's first token once (a later start says the old ones stay valid).
void print_token(const std::string& token_db, const std::string& name,
                 const std::string& data_dir) {
  platform::DeploymentStore store(token_db);
  bool has_token = false;
  for (const auto& t : store.live_tokens()) has_token = has_token || t.service == name;
  if (!has_token) {
    auto [token, secret] = store.create_token(name);
    std::printf("  token (shown once): %s\n", secret.c_str());
  } else {
    std::printf(
        "  tokens: existing ones for '%s' stay valid (`zenith token create --local "
        "--service %s --data %s` makes another)\n",
        name.c_str(), name.c_str(), data_dir.c_str());
  }
}

void write_port_file(const std::string& port_file, int port) {
  if (port_file.empty()) return;
  const std::string tmp = port_file + ".tmp";
  std::ofstream(tmp) << port << "\n";
  fs::rename(tmp, port_file);
}

// An LLM: a Hugging Face model directory or an LLM package, with OpenAI's API.
int serve_llm(const std::string& dir, const serve::ServeOptions& o, const LlmFlags& flags,
              bool managed, const std::string& port_file, const std::string& data_dir) {
  serve::llm::LlmServeOptions lo;
  lo.name = o.name;
  lo.version = o.version;
  lo.host = o.host;
  lo.port = o.port;
  lo.tls = o.tls;
  lo.cert = o.cert;
  lo.key = o.key;
  lo.tls_dir = o.tls_dir;
  lo.token_db = o.token_db;
  lo.admin_token = platform::read_token(data_dir);
  lo.max_body_bytes = o.max_body_bytes;
  lo.http_threads = o.http_threads;
  lo.chat_template = flags.chat_template;
  lo.dtype = flags.dtype;
  lo.engine = flags.engine;
  lo.engine.max_waiting = o.batch.max_queue;
  auto kv = platform::parse_size(flags.kv_cache_memory);
  if (!kv || *kv <= 0)
    throw std::runtime_error("[serve] bad --kv-cache-memory '" + flags.kv_cache_memory + "'");
  lo.engine.kv_cache_bytes = *kv;
  lo.engine.kv_cache_dtype = flags.kv_cache_dtype == "bf16"  ? DType::bf16
                             : flags.kv_cache_dtype == "f16" ? DType::f16
                                                             : DType::f32;  // auto, f32
  ZENITH_CHECK(flags.threads >= 0, "[serve] --threads must be >= 0, got ", flags.threads);
  if (flags.threads > 0) context::set_num_threads(flags.threads);
  std::string model_dir = dir, source = dir;
  if (serve::is_llm_package(dir)) {
    const auto spec = serve::read_llm_package(dir);
    if (lo.name.empty()) lo.name = spec.name;
    for (const auto& [name, rel] : spec.adapters) lo.adapters.emplace_back(name, dir + "/" + rel);
    source = spec.source + " (package sha256 " + spec.sha256.substr(0, 12) + ")";
    model_dir = serve::llm_package_model(dir);
  }
  for (const auto& a : flags.adapters) lo.adapters.push_back(serve::parse_adapter_flag(a));
  if (managed && !lo.name.empty())  // a platform service keeps the adapters added at run time
    lo.adapters_file = data_dir + "/services/" + lo.name + "/adapters.json";
  if (!serve::is_llm_package(dir)) source = model_dir = serve::resolve_llm_model(dir, lo.adapters);
  serve::llm::LlmServer server(fs::absolute(model_dir).string(), lo);
  const int port = server.bind();
  const auto& name = server.options().name;
  const auto& config = server.engine().config();
  std::printf("zenith serve: %s (LLaMA, %lld layers, vocab %lld, context %lld) from %s on %s\n",
              name.c_str(), (long long)config.num_hidden_layers, (long long)config.vocab_size,
              (long long)server.engine().max_model_len(), source.c_str(), server.url().c_str());
  if (!lo.dtype.empty()) std::printf("  weights: %s (--dtype, at load)\n", lo.dtype.c_str());
  std::printf(
      "  engine: max batched tokens %lld, max step cost %g, KV cache %s, threads %d, KV dtype %s "
      "(--kv-cache-dtype %s)\n",
      (long long)lo.engine.max_batched_tokens, lo.engine.max_step_cost,
      flags.kv_cache_memory.c_str(), context::get_num_threads(),
      dtype_name(lo.engine.kv_cache_dtype), flags.kv_cache_dtype.c_str());
  if (!lo.chat_template.empty())
    std::printf("  chat template: %s (--chat-template)\n", lo.chat_template.c_str());
  for (const auto& [adapter, adapter_dir] : lo.adapters)
    std::printf("  adapter: %s (%s)\n", adapter.c_str(), adapter_dir.c_str());
  std::printf("  OpenAI API: %s/v1 (chat/completions, completions, models)\n",
              server.url().c_str());
  if (o.tls)
    std::printf("  certificate: %s\n", server.cert_path().c_str());
  else
    std::printf("  WARNING: plain HTTP (--insecure-http): tokens travel unencrypted\n");
  if (!managed) {
    print_token(o.token_db, name, data_dir);
    std::printf(
        "  try: curl %s%s -H \"Authorization: Bearer $TOKEN\" %s/v1/chat/completions -d "
        "'{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}'\n",
        o.tls ? "--cacert " : "", o.tls ? server.cert_path().c_str() : "", server.url().c_str(),
        name.c_str());
  }
  std::fflush(stdout);
  write_port_file(port_file, port);
  StopSignal stop("serve", "", [&] { server.stop(); });
  server.serve();
  return 0;
}

int run_serve(int argc, char** argv) {
  CLI::App app{
      "Serve a model over HTTPS in the foreground: a package or checkpoint (KServe v2), "
      "or an LLM directory (OpenAI API)",
      "zenith serve"};
  std::string package, data_dir = default_data_dir(), port_file, max_body = "8Mi";
  std::string arch, dataset;
  serve::ServeOptions o;
  bool insecure = false, managed = false;
  o.port = 8443;
  app.add_option("package", package,
                 "model package dir (from `zenith deploy`), a checkpoint, a Hugging Face "
                 "LLaMA directory or a GGUF file")
      ->required();
  app.add_option("--name", o.name, "model name in URLs (default: the package's)");
  app.add_option("--version", o.version, "registry version reported in responses")
      ->capture_default_str();
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "TCP port (0: any free port)")->capture_default_str();
  app.add_option("--port-file", port_file, "write the bound port here once serving");
  app.add_option("--data", data_dir, "data dir: token store (zenith.db), tls/, packages/")
      ->capture_default_str();
  app.add_option("--cert", o.cert, "TLS certificate (PEM); default: self-signed in DATA/tls");
  app.add_option("--key", o.key, "TLS private key (PEM)");
  app.add_flag("--insecure-http", insecure, "serve plain HTTP instead of HTTPS");
  app.add_option("--replicas", o.batch.replicas, "model copies run in parallel")
      ->capture_default_str();
  app.add_option("--max-batch", o.batch.max_batch, "samples per model run (1: no batching)")
      ->capture_default_str();
  app.add_option("--max-delay-ms", o.batch.max_delay_ms, "longest wait for a batch to fill")
      ->capture_default_str();
  app.add_option("--max-queue", o.batch.max_queue, "requests waiting; more get 429")
      ->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "per-request timeout in seconds (504)")
      ->capture_default_str();
  app.add_option("--max-body", max_body, "request body limit (413), e.g. 8Mi")
      ->capture_default_str();
  app.add_option("--max-request-samples", o.max_request_samples, "samples per infer request")
      ->capture_default_str();
  app.add_option("--http-threads", o.http_threads, "connections served at once")
      ->capture_default_str();
  app.add_option("--arch", arch, "checkpoint input: zoo model (default: the checkpoint's)");
  app.add_option("--dataset", dataset, "checkpoint input: its dataset (default: the checkpoint's)");
  app.add_flag("--managed", managed, "run by `zenith server`: print no token");
  LlmFlags llm;
  app.add_option("--adapter", llm.adapters,
                 "LLM: a PEFT adapter served as model NAME (NAME=DIR or NAME=X.gguf; repeatable)");
  app.add_option("--kv-cache-memory", llm.kv_cache_memory, "LLM: the KV cache pool's size")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", llm.kv_cache_dtype,
                 "LLM: the KV cache's element: auto (= f32), f32, or bf16 / f16 (half the bytes "
                 "per token: twice the tokens in --kv-cache-memory)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  app.add_option("--max-batched-tokens", llm.engine.max_batched_tokens,
                 "LLM: tokens per engine step (long prompts are prefilled in chunks of it)")
      ->capture_default_str();
  app.add_option("--max-step-cost", llm.engine.max_step_cost,
                 "LLM: while streams decode, prefill at most what keeps a step within this "
                 "many decode steps (0: the whole budget)")
      ->capture_default_str();
  app.add_option("--chat-template", llm.chat_template,
                 "LLM: llama-2, llama-3, chatml or alpaca (default: tokenizer_config.json's)");
  app.add_option("--threads", llm.threads, "LLM: compute threads (0: the default)");
  app.add_option("--dtype", llm.dtype,
                 "LLM: weights at load: f32, bf16, f16, or q8_0, q4_0, q4_k (GGML blocks for the "
                 "linear layers; default: the file's)");
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  if (managed) {
    // A service goes when its server goes, however the server ends.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1) return 1;
  }
  auto body = platform::parse_size(max_body);
  if (!body || *body <= 0) throw std::runtime_error("[serve] bad --max-body '" + max_body + "'");
  o.max_body_bytes = size_t(*body);
  o.tls = !insecure;
  data_dir = fs::absolute(data_dir).string();
  fs::create_directories(data_dir);
  o.tls_dir = data_dir + "/tls";
  o.token_db = data_dir + "/zenith.db";
  o.admin_token = platform::read_token(data_dir);
  if (fs::is_directory(package) &&
      (serve::is_hf_model_dir(package) || serve::is_llm_package(package) ||
       fs::is_regular_file(package + "/adapter_config.json")))
    return serve_llm(package, o, llm, managed, port_file, data_dir);
  if (fs::is_regular_file(package) && models::is_gguf_file(package))  // llama.cpp's format
    return serve_llm(package, o, llm, managed, port_file, data_dir);

  if (fs::is_regular_file(package)) {
    // A checkpoint: package it first, into DATA/packages/<name>-<n>.
    const std::string name = o.name.empty() ? "model" : o.name;
    std::string dir;
    for (int i = 1;; ++i) {
      dir = data_dir + "/packages/" + name + "-" + std::to_string(i);
      if (!fs::exists(dir)) break;
    }
    auto spec = serve::write_package(package, dir, name, {arch, dataset, ""});
    std::printf("packaged %s (%s) into %s\n", package.c_str(), spec.arch.c_str(), dir.c_str());
    package = dir;
  }

  serve::InferenceServer server(fs::absolute(package).string(), o);
  const int port = server.bind();
  const auto& spec = server.package();
  const std::string name = server.options().name;
  std::printf("zenith serve: %s (%s, %lldx%lldx%lld -> %lld classes, sha256 %.12s) on %s\n",
              name.c_str(), spec.arch.c_str(), (long long)spec.channels, (long long)spec.image_size,
              (long long)spec.image_size, (long long)spec.num_classes, spec.sha256.c_str(),
              server.url().c_str());
  std::printf("  batching: max batch %d, max delay %g ms, queue %d, %d replica(s); timeout %g s\n",
              o.batch.max_batch, o.batch.max_delay_ms, o.batch.max_queue, o.batch.replicas,
              o.timeout_s);
  if (o.tls)
    std::printf("  certificate: %s\n", server.cert_path().c_str());
  else
    std::printf("  WARNING: plain HTTP (--insecure-http): tokens travel unencrypted\n");
  if (!managed) {
    print_token(o.token_db, name, data_dir);
    std::printf(
        "  try: curl %s%s -H \"Authorization: Bearer $TOKEN\" --data-binary @image.png "
        "%s/v2/models/%s/classify\n",
        o.tls ? "--cacert " : "", o.tls ? server.cert_path().c_str() : "", server.url().c_str(),
        name.c_str());
  }
  std::fflush(stdout);
  write_port_file(port_file, port);

  StopSignal stop("serve", "", [&] { server.stop(); });
  server.serve();
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("serve", "Serve a model package over HTTPS in the foreground (no server)",
               zenith::cli::run_serve);
