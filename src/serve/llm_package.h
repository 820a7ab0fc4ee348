// LLM packages: what `zenith deploy --model HF_DIR [--adapter NAME=DIR ...]` registers and
// `zenith serve` runs as an OpenAI-compatible service (serve/llm/http_server.h).
//
//   DIR/package.json        {"format": "zenith-llm-package", "name", "source", "files",
//                            "adapters": {NAME: "adapters/NAME"}, "created_at", "sha256"}
//   DIR/config.json, DIR/*.safetensors, tokenizer files, tokenizer_config.json (its chat
//                            template), generation_config.json: the HF model directory's files
//   DIR/model.gguf          instead of the two lines above, for a package made from a GGUF file
//   DIR/adapters/NAME/      each PEFT adapter (adapter_config.json, adapter_model.safetensors)
//
// "files" lists every file but package.json; the content hash covers them in that order
// (platform::package_content_hash), so a modified package is refused.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zenith::serve {

struct LlmPackageSpec {
  std::string name;    // the service name it was made for
  std::string source;  // the model directory it was made from
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> adapters;  // name, path inside the package
  std::string sha256;
  double created_at = 0;
};

// Whether DIR is a Hugging Face model directory (config.json, no package.json).
bool is_hf_model_dir(const std::string& dir);
// Whether DIR/package.json is an LLM package's.
bool is_llm_package(const std::string& dir);

// Copies the model's files (an HF directory's, or a GGUF file as model.gguf) and each adapter
// (name, directory) into `dir` (created; must not exist) and writes package.json. Errors name
// the missing file.
LlmPackageSpec write_llm_package(const std::string& model_dir,
                                 const std::vector<std::pair<std::string, std::string>>& adapters,
                                 const std::string& dir, const std::string& name);
// What the service loads from package DIR: DIR/model.gguf in a package made from a GGUF file,
// else DIR.
std::string llm_package_model(const std::string& dir);
// Reads DIR/package.json and checks the content hash; errors name the directory.
LlmPackageSpec read_llm_package(const std::string& dir);

// What `--model DIR` names: DIR itself when it is a model directory; for a LoRA fine-tune's
// output (adapter_config.json, no config.json) its base model (base_model_name_or_path, as
// given or relative to DIR), with DIR added to `adapters` under DIR's own name.
std::string resolve_llm_model(const std::string& dir,
                              std::vector<std::pair<std::string, std::string>>& adapters);

// "NAME=DIR" (the --adapter flag) -> {NAME, DIR}; errors name the flag.
std::pair<std::string, std::string> parse_adapter_flag(const std::string& text);

}  // namespace zenith::serve
