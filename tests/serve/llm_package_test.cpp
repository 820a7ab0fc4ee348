// LLM packages (src/serve/llm_package.cpp): what `zenith deploy --model HF_DIR --adapter ...`
// copies, the content hash over every file, and the paths a manifest may name.
#include "serve/llm_package.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "platform/deployments/deployment_store.h"
#include "support/temp_dir.h"

namespace zenith::serve {
namespace {

namespace fs = std::filesystem;
using zenith::testing::TempDir;

const std::string kModel = ZENITH_SOURCE_DIR "/examples/llm/fortunes-llama";

// A stand-in PEFT adapter directory (the package only copies it).
std::string fake_adapter(const std::string& dir) {
  fs::create_directories(dir);
  std::ofstream(dir + "/adapter_config.json") << R"({"peft_type": "LORA", "r": 2})";
  std::ofstream(dir + "/adapter_model.safetensors") << "weights";
  std::ofstream(dir + "/metrics.jsonl") << "{}";  // a run's log: not part of the package
  return dir;
}

TEST(LlmPackage, CopiesModelTokenizerAndAdaptersAndChecksTheirHash) {
  TempDir tmp("llm_package");
  const std::string adapter = fake_adapter(tmp.str() + "/lora");
  const std::string pkg = tmp.str() + "/pkg";
  EXPECT_TRUE(is_hf_model_dir(kModel));
  auto spec = write_llm_package(kModel, {{"fun", adapter}}, pkg, "fortunes");
  EXPECT_TRUE(is_llm_package(pkg));
  EXPECT_FALSE(is_hf_model_dir(pkg));  // it has a package.json
  for (const char* f :
       {"config.json", "model.safetensors", "tokenizer.json", "tokenizer.model",
        "tokenizer_config.json", "generation_config.json", "adapters/fun/adapter_config.json",
        "adapters/fun/adapter_model.safetensors"})
    EXPECT_TRUE(fs::is_regular_file(pkg + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(pkg + "/adapters/fun/metrics.jsonl"));
  const auto back = read_llm_package(pkg);
  EXPECT_EQ(back.sha256, spec.sha256);
  EXPECT_EQ(back.name, "fortunes");
  ASSERT_EQ(back.adapters.size(), 1u);
  EXPECT_EQ(back.adapters[0], std::make_pair(std::string("fun"), std::string("adapters/fun")));
  EXPECT_EQ(platform::package_content_hash(pkg), spec.sha256);
  // Any file changed afterwards (here the adapter's weights) is refused.
  std::ofstream(pkg + "/adapters/fun/adapter_model.safetensors") << "other weights";
  EXPECT_THROW(
      {
        try {
          read_llm_package(pkg);
        } catch (const std::exception& e) {
          EXPECT_NE(std::string(e.what()).find("content hash mismatch"), std::string::npos);
          throw;
        }
      },
      std::exception);
}

TEST(LlmPackage, ManifestPathsStayInsideThePackage) {
  using nlohmann::json;
  for (const char* bad : {"../x", "/etc/passwd", "a/../../b", "package.json", "./a", ""})
    EXPECT_THROW(platform::package_files(json{{"files", {bad}}}), std::runtime_error) << bad;
  EXPECT_EQ(platform::package_files(json{{"files", {"config.json", "adapters/a/x"}}}),
            (std::vector<std::string>{"config.json", "adapters/a/x"}));
  EXPECT_EQ(platform::package_files(json::object()),
            std::vector<std::string>{"weights.safetensors"});
}

TEST(LlmPackage, AdapterFlagsAndFineTuneOutputs) {
  TempDir tmp("llm_adapter");
  const std::string adapter = fake_adapter(tmp.str() + "/my-lora");
  EXPECT_EQ(parse_adapter_flag("fun=" + adapter), std::make_pair(std::string("fun"), adapter));
  EXPECT_THROW(parse_adapter_flag(adapter), std::exception);             // no NAME=
  EXPECT_THROW(parse_adapter_flag("a/b=" + adapter), std::exception);    // bad name
  EXPECT_THROW(parse_adapter_flag("fun=" + tmp.str()), std::exception);  // not an adapter
  std::vector<std::pair<std::string, std::string>> adapters;
  EXPECT_EQ(resolve_llm_model(kModel, adapters), kModel);
  EXPECT_TRUE(adapters.empty());
  // A LoRA fine-tune's --out: its base model, and the adapter under the directory's name.
  std::ofstream(adapter + "/adapter_config.json")
      << nlohmann::json{{"peft_type", "LORA"}, {"base_model_name_or_path", kModel}}.dump();
  EXPECT_EQ(resolve_llm_model(adapter, adapters), kModel);
  ASSERT_EQ(adapters.size(), 1u);
  EXPECT_EQ(adapters[0].first, "my-lora");
}

}  // namespace
}  // namespace zenith::serve

namespace zenith::serve {
namespace {

// A GGUF adapter file (`--adapter NAME=X.gguf`): the flag takes it, the package keeps it as
// adapters/NAME.gguf and reads it back; a file that is not GGUF is refused.
TEST(LlmPackage, GgufAdapterFileIsKeptAsOneFile) {
  TempDir tmp("llm_gguf_adapter");
  const std::string gguf = tmp.str() + "/lora.gguf";
  std::ofstream(gguf) << "GGUF and the rest";  // the package copies it; the engine reads it
  std::ofstream(tmp.str() + "/not.gguf") << "text";
  EXPECT_EQ(parse_adapter_flag("fun=" + gguf), std::make_pair(std::string("fun"), gguf));
  EXPECT_THROW(parse_adapter_flag("fun=" + tmp.str() + "/not.gguf"), std::exception);
  const std::string pkg = tmp.str() + "/pkg";
  auto spec = write_llm_package(kModel, {{"fun", gguf}}, pkg, "fortunes");
  EXPECT_NE(std::find(spec.files.begin(), spec.files.end(), "adapters/fun.gguf"), spec.files.end());
  const auto back = read_llm_package(pkg);
  ASSERT_EQ(back.adapters.size(), 1u);
  EXPECT_EQ(back.adapters[0], std::make_pair(std::string("fun"), std::string("adapters/fun.gguf")));
}

}  // namespace
}  // namespace zenith::serve
