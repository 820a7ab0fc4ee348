// `zenith deploy --model CKPT --name NAME`: packages a checkpoint (architecture, weights, input
// spec and preprocessing, labels, content hash), registers it with the running `zenith server`
// as the next version of NAME, starts the HTTPS service and prints its URL and a first token.
// `zenith deploy --model HF_DIR [--adapter NAME=DIR ...] --name NAME` does the same for an LLM
// (model, tokenizer, chat template and adapters: serve/llm_package.h), served with OpenAI's API;
// `--model X.gguf` packages a llama.cpp file, `--dtype` quantizes at the service's load.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "cli/client.h"
#include "cli/command.h"
#include "serve/llm_package.h"
#include "serve/package.h"
#include "zenith/gguf.h"

namespace zenith::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int run_deploy(int argc, char** argv) {
  CLI::App app{"Deploy a checkpoint or an LLM as an HTTPS inference service on the server",
               "zenith deploy"};
  ClientConfig config;
  std::string checkpoint, name, labels, max_body, host;
  serve::PackageOptions package_options;
  int replicas = 1, port = 0, max_batch = 0, max_queue = 0, http_threads = 0;
  double max_delay_ms = -1, timeout = 0;
  bool insecure = false;
  app.add_option("--model", checkpoint,
                 "checkpoint (.safetensors) from `zenith train`, a Hugging Face LLaMA "
                 "directory (a fine-tune's --out) or a GGUF file")
      ->required();
  std::vector<std::string> adapters;
  std::string kv_cache_memory, kv_cache_dtype, dtype, chat_template;
  std::int64_t max_batched_tokens = 0;
  double max_step_cost = std::numeric_limits<double>::quiet_NaN();  // NaN: not given
  int threads = 0;
  app.add_option("--adapter", adapters,
                 "LLM: a PEFT adapter served as model NAME (NAME=DIR or NAME=X.gguf; repeatable)");
  app.add_option("--kv-cache-memory", kv_cache_memory,
                 "LLM: the KV cache pool's size (default 256Mi)");
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "LLM: the KV cache's element: auto (= f32), f32, bf16 or f16 (default auto)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}));
  app.add_option("--max-batched-tokens", max_batched_tokens,
                 "LLM: tokens per engine step (long prompts are prefilled in chunks of it; "
                 "default 64)");
  app.add_option("--max-step-cost", max_step_cost,
                 "LLM: while streams decode, prefill at most what keeps a step within this many "
                 "decode steps (default 2; 0: the whole budget)");
  app.add_option("--chat-template", chat_template,
                 "LLM: llama-2, llama-3, chatml or alpaca (default: tokenizer_config.json's)");
  app.add_option("--threads", threads, "LLM: compute threads of the service (default: all cores)");
  app.add_option("--dtype", dtype,
                 "LLM: weights at load: f32, bf16, f16, or q8_0, q4_0, q4_k (GGML blocks for the "
                 "linear layers; default: the file's)");
  app.add_option("--name", name, "service name: lowercase letters, digits, '-'")->required();
  app.add_option("--arch", package_options.arch, "zoo model (default: the checkpoint's)");
  app.add_option("--dataset", package_options.dataset,
                 "dataset it was trained on (default: the checkpoint's): input size and "
                 "preprocessing");
  app.add_option("--labels", package_options.labels_file, "label names, one per line");
  app.add_option("--replicas", replicas, "model copies run in parallel")->capture_default_str();
  app.add_option("--port", port, "service port (default: any free port)");
  app.add_option("--max-batch", max_batch, "samples per model run (default 32; 1: no batching)");
  app.add_option("--max-delay-ms", max_delay_ms, "longest wait for a batch to fill (default 5)");
  app.add_option("--max-queue", max_queue, "requests waiting before 429 (default 256)");
  app.add_option("--timeout", timeout, "per-request timeout in seconds (default 30)");
  app.add_option("--max-body", max_body, "request body limit (default 8Mi)");
  app.add_option("--http-threads", http_threads, "connections served at once (default 128)");
  app.add_option("--host", host, "address the service listens on (default 127.0.0.1)");
  app.add_flag("--insecure-http", insecure, "plain HTTP instead of HTTPS");
  add_client_options(app, config);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;

  // The package is built here (this side reads the checkpoint) and copied by the server.
  char tmpl[] = "/tmp/zenith-deploy.XXXXXX";
  ZENITH_CHECK(mkdtemp(tmpl) != nullptr, "[deploy] cannot make a temporary directory");
  const std::string staging = std::string(tmpl) + "/package";
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{tmpl};
  const bool llm = fs::is_directory(checkpoint) || models::is_gguf_file(checkpoint);
  std::string what;
  if (llm) {
    std::vector<std::pair<std::string, std::string>> adapter_dirs;
    for (const auto& a : adapters) adapter_dirs.push_back(serve::parse_adapter_flag(a));
    const std::string model_dir = serve::resolve_llm_model(checkpoint, adapter_dirs);
    auto spec = serve::write_llm_package(model_dir, adapter_dirs, staging, name);
    what = "LLM from " + model_dir + ", " + std::to_string(adapter_dirs.size()) +
           " adapter(s), sha256 " + spec.sha256.substr(0, 16);
  } else {
    ZENITH_CHECK(adapters.empty() && kv_cache_memory.empty() && kv_cache_dtype.empty() &&
                     dtype.empty() && chat_template.empty() && max_batched_tokens == 0 &&
                     std::isnan(max_step_cost) && threads == 0,
                 "[deploy] --adapter, --kv-cache-memory, --kv-cache-dtype, --max-batched-tokens, "
                 "--max-step-cost, --chat-template, --threads and --dtype are for an LLM (a "
                 "directory or a GGUF file), not a checkpoint");
    auto spec = serve::write_package(checkpoint, staging, name, package_options);
    what = spec.arch + ", sha256 " + spec.sha256.substr(0, 16);
  }

  json options = json::object();
  if (max_batch > 0) options["max-batch"] = max_batch;
  if (max_delay_ms >= 0) options["max-delay-ms"] = max_delay_ms;
  if (max_queue > 0) options["max-queue"] = max_queue;
  if (timeout > 0) options["timeout"] = timeout;
  if (!max_body.empty()) options["max-body"] = max_body;
  if (http_threads > 0) options["http-threads"] = http_threads;
  if (!host.empty()) options["host"] = host;
  if (insecure) options["insecure-http"] = true;
  if (!kv_cache_memory.empty()) options["kv-cache-memory"] = kv_cache_memory;
  if (!kv_cache_dtype.empty()) options["kv-cache-dtype"] = kv_cache_dtype;
  // Checked here: a bad value would fail the service at its start.
  if (max_batched_tokens != 0) {
    ZENITH_CHECK(max_batched_tokens >= 1, "[deploy] --max-batched-tokens must be >= 1, got ",
                 max_batched_tokens);
    options["max-batched-tokens"] = max_batched_tokens;
  }
  if (!std::isnan(max_step_cost)) {
    ZENITH_CHECK(max_step_cost >= 0, "[deploy] --max-step-cost must be >= 0, got ", max_step_cost);
    options["max-step-cost"] = max_step_cost;
  }
  if (!chat_template.empty()) {
    static const std::vector<std::string> kTemplates = {"llama-2", "llama-3", "chatml", "alpaca"};
    ZENITH_CHECK(std::find(kTemplates.begin(), kTemplates.end(), chat_template) != kTemplates.end(),
                 "[deploy] --chat-template: expected llama-2, llama-3, chatml or alpaca, got '",
                 chat_template, "'");
    options["chat-template"] = chat_template;
  }
  ZENITH_CHECK(threads >= 0, "[deploy] --threads must be >= 0, got ", threads);
  if (threads > 0) options["threads"] = threads;
  if (!dtype.empty()) {  // checked here: the service would fail at its start
    static const std::vector<std::string> kDtypes = {"f32", "bf16", "f16", "q8_0", "q4_0", "q4_k"};
    ZENITH_CHECK(std::find(kDtypes.begin(), kDtypes.end(), dtype) != kDtypes.end(),
                 "[deploy] --dtype: expected f32, bf16, f16, q8_0, q4_0 or q4_k, got '", dtype,
                 "'");
    options["dtype"] = dtype;
  }
  auto client = make_client(config);
  json body = {{"name", name},
               {"package", staging},
               {"replicas", replicas},
               {"port", port},
               {"options", options}};
  json r = expect(client.post("/api/v1/services", body.dump()), 201);
  std::printf("deployed %s version %d (%s)\n", name.c_str(), r["model"]["version"].get<int>(),
              what.c_str());
  const std::string url = r["url"].get<std::string>();
  std::printf("  url:     %s\n", url.c_str());
  if (llm)
    std::printf("  api:     %s/v1 (OpenAI: chat/completions, completions, models)\n", url.c_str());
  else
    std::printf("  model:   %s/v2/models/%s (infer, classify)\n", url.c_str(), name.c_str());
  if (!insecure) std::printf("  cert:    %s\n", r["ca_cert"].get<std::string>().c_str());
  if (r.contains("token")) {
    std::printf("  token:   %s\n", r["token"]["secret"].get<std::string>().c_str());
    std::printf("           (shown once; `zenith token create --service %s` makes more)\n",
                name.c_str());
  } else {
    std::printf("  tokens:  the service's existing tokens stay valid\n");
  }
  const std::string cacert = insecure ? "" : "--cacert " + r["ca_cert"].get<std::string>() + " ";
  if (llm)
    std::printf(
        "  try:     curl %s-H \"Authorization: Bearer $TOKEN\" %s/v1/chat/completions -d "
        "'{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}'\n",
        cacert.c_str(), url.c_str(), name.c_str());
  else
    std::printf(
        "  try:     curl %s-H \"Authorization: Bearer $TOKEN\" --data-binary @image.png "
        "%s/v2/models/%s/classify\n",
        cacert.c_str(), url.c_str(), name.c_str());
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("deploy", "Deploy a checkpoint or an LLM as an HTTPS inference service",
               zenith::cli::run_deploy);
