// `zenith convert` as a user runs it (the README's command on the test fixture), and its errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/run_zenith.h"
#include "zenith/hf.h"

namespace fs = std::filesystem;

namespace {

using zenith::testing::run_zenith;

const std::string kCheckpoint =
    (fs::path(ZENITH_FIXTURE_DIR) / "llm_io" / "llama2c_v0.bin").string();

class ConvertCli : public ::testing::Test {
 protected:
  void SetUp() override { fs::remove_all(out_); }
  void TearDown() override { fs::remove_all(out_); }
  fs::path out_ = fs::temp_directory_path() / ("zenith_convert_" + std::to_string(::getpid()));
};

TEST_F(ConvertCli, WritesAnHfDirectory) {
  auto r = run_zenith("convert --from llama2c --checkpoint " + kCheckpoint + " --out " +
                      out_.string() + " --dtype bf16 --max-shard-size 20KB");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("LlamaForCausalLM, 2 layers, hidden 24, 4 heads (2 kv), vocab 48"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bfloat16"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(out_ / "config.json"));
  EXPECT_TRUE(fs::exists(out_ / "model-00001-of-00002.safetensors"));  // 45 KB of bf16 weights
  EXPECT_TRUE(fs::exists(out_ / "model.safetensors.index.json"));
  auto state = zenith::io::load_hf_state(out_.string());
  EXPECT_EQ(state.size(), 21u);
  EXPECT_EQ(state.at("lm_head.weight").dtype(), zenith::DType::bf16);
}

TEST_F(ConvertCli, BadArgumentsAreClearErrors) {
  auto r = run_zenith("convert --from gguf --checkpoint x --out " + out_.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--from 'gguf' is not supported (known: llama2c)"), std::string::npos)
      << r.output;
  r = run_zenith("convert --from llama2c --checkpoint " + kCheckpoint + " --out " + out_.string() +
                 " --dtype int8");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--dtype 'int8' is not supported"), std::string::npos) << r.output;
  r = run_zenith("convert --from llama2c --checkpoint " + kCheckpoint + " --out " + out_.string() +
                 " --max-shard-size 5XB");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--max-shard-size '5XB'"), std::string::npos) << r.output;
  r = run_zenith("convert --from llama2c --checkpoint /nonexistent.bin --out " + out_.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("[llama2c] /nonexistent.bin: cannot open"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out_ / "config.json"));
}

}  // namespace
