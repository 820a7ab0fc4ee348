// llama2.c checkpoints: both file versions read into HF's names and rotary order bit-exactly as
// torch computes them (scripts/make_llm_io_fixtures.py), converted to HF model directories in
// f32/bf16/f16, and bad files rejected naming the file and the header field.
#include "zenith/llama2c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "support/tensor_bits.h"

namespace fs = std::filesystem;
using zenith::DType;
using zenith::Tensor;
using zenith::testing::read_bytes;
using zenith::testing::same_bits;
using zenith::testing::same_state;
using zenith::testing::TempDir;
using zenith::testing::throws_with;
namespace io = zenith::io;
namespace models = zenith::models;

namespace {

const fs::path kFixtures = fs::path(ZENITH_FIXTURE_DIR) / "llm_io";
const std::string kV0 = (kFixtures / "llama2c_v0.bin").string();
const std::string kV1 = (kFixtures / "llama2c_v1.bin").string();

// The HF tensors torch computed from the v0 checkpoint (untied); without the cast references.
std::map<std::string, Tensor> expected_hf() {
  auto all = io::load_safetensors((kFixtures / "llama2c_hf.safetensors").string());
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : all)
    if (name.rfind("bf16.", 0) != 0 && name.rfind("f16.", 0) != 0) out[name] = t;
  return out;
}

TEST(Llama2c, ReadsVersion0IntoHfNamesAndRotaryOrder) {
  auto ck = io::read_llama2c(kV0);
  const auto& h = ck.header;
  EXPECT_EQ(h.version, 0);
  EXPECT_EQ(h.dim, 24);
  EXPECT_EQ(h.hidden_dim, 40);
  EXPECT_EQ(h.n_layers, 2);
  EXPECT_EQ(h.n_heads, 4);
  EXPECT_EQ(h.n_kv_heads, 2);
  EXPECT_EQ(h.vocab_size, 48);  // stored negated: an own classifier
  EXPECT_EQ(h.seq_len, 12);
  EXPECT_FALSE(h.shared_classifier);
  EXPECT_TRUE(same_state(ck.tensors, expected_hf()));
}

TEST(Llama2c, ReadsVersion1WithASharedClassifier) {
  auto ck = io::read_llama2c(kV1);
  EXPECT_EQ(ck.header.version, 1);
  EXPECT_TRUE(ck.header.shared_classifier);
  EXPECT_EQ(ck.header.vocab_size, 48);
  auto want = expected_hf();
  want.erase("lm_head.weight");
  EXPECT_TRUE(same_state(ck.tensors, want));
}

TEST(Llama2c, RotaryPermutationTakesEvenRowsThenOddRowsOfEachHead) {
  // Two heads of size 6 over one input column: rows 0..11.
  Tensor w = Tensor::arange(12, DType::f32).reshape({12, 1});
  Tensor p = io::rotary_interleaved_to_halves(w, 2);
  EXPECT_EQ(p.to_int_vector(), (std::vector<int64_t>{0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11}));
  EXPECT_TRUE(throws_with(
      [&] {
        io::rotary_interleaved_to_halves(Tensor::zeros({10, 3}), 2);
      },
      "even head size"));
}

TEST(Llama2c, ConvertsToAnHfDirectoryInEachDtype) {
  TempDir dir("l2c_convert");
  auto want = expected_hf();
  auto casts = io::load_safetensors((kFixtures / "llama2c_hf.safetensors").string());
  const std::string q0 = "model.layers.0.self_attn.q_proj.weight";
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    fs::path out = dir.path() / zenith::dtype_name(dtype);
    models::convert_llama2c(kV0, out.string(), {.dtype = dtype});
    auto config = models::load_llama_config(out.string());
    EXPECT_EQ(config.architecture, "LlamaForCausalLM");
    EXPECT_EQ(config.hidden_size, 24);
    EXPECT_EQ(config.intermediate_size, 40);
    EXPECT_EQ(config.num_hidden_layers, 2);
    EXPECT_EQ(config.num_attention_heads, 4);
    EXPECT_EQ(config.num_key_value_heads, 2);
    EXPECT_EQ(config.head_dim, 6);
    EXPECT_EQ(config.vocab_size, 48);
    EXPECT_EQ(config.max_position_embeddings, 12);
    EXPECT_EQ(config.rope_theta, 10000);
    EXPECT_EQ(config.rms_norm_eps, 1e-5);
    EXPECT_FALSE(config.tie_word_embeddings);
    auto state = io::load_hf_state(out.string());
    models::check_llama_state(config, state, out.string());
    ASSERT_EQ(state.size(), want.size());
    for (const auto& [name, t] : state) EXPECT_EQ(t.dtype(), dtype) << name;
    if (dtype == DType::f32) {
      EXPECT_EQ(config.torch_dtype, "float32");
      EXPECT_TRUE(same_state(state, want));
    } else {
      // Round to nearest even, bit for bit what torch's .to() gives.
      const char* prefix = dtype == DType::bf16 ? "bf16." : "f16.";
      EXPECT_EQ(config.torch_dtype, dtype == DType::bf16 ? "bfloat16" : "float16");
      EXPECT_TRUE(same_bits(state.at(q0), casts.at(prefix + q0)));
      EXPECT_TRUE(same_bits(state.at("lm_head.weight"), want.at("lm_head.weight").to(dtype)));
    }
  }
  auto j = nlohmann::json::parse(read_bytes(dir.path() / "float32" / "config.json"));
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["hidden_act"], "silu");
  EXPECT_TRUE(j["rope_scaling"].is_null());
}

TEST(Llama2c, TiedShardedAndWithATokenizer) {
  TempDir dir("l2c_tied");
  fs::path tokenizer = dir.path() / "tok.model";
  std::ofstream(tokenizer, std::ios::binary) << std::string("\x0a\x05piece\x00", 8);
  fs::path out = dir.path() / "out";
  auto c = models::convert_llama2c(kV1, out.string(),
                                   {.max_shard_bytes = 3000, .tokenizer = tokenizer.string()});
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  EXPECT_EQ(read_bytes((out / "tokenizer.model").string()), read_bytes(tokenizer.string()));
  auto want = expected_hf();
  want.erase("lm_head.weight");
  EXPECT_TRUE(same_state(io::load_hf_state(out.string()), want));  // sharded = unsharded
  EXPECT_TRUE(models::load_llama_config(out.string()).tie_word_embeddings);
}

class Llama2cErrors : public ::testing::Test {
 protected:
  std::string write(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary) << bytes;
    return path_;
  }
  static std::string i32(int32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
  // A version-0 header (28 bytes) with these fields.
  static std::string header(std::vector<int32_t> f) {
    std::string s;
    for (int32_t v : f) s += i32(v);
    return s;
  }
  bool fails(const std::string& bytes, const std::string& needle) {
    write(bytes);
    auto read = [&] { io::read_llama2c(path_); };
    return throws_with(read, "[llama2c] " + path_ + ": ") && throws_with(read, needle);
  }
  TempDir dir_{"l2c_err"};
  std::string path_ = (dir_.path() / "bad.bin").string();
};

TEST_F(Llama2cErrors, BadHeadersNameTheFileAndField) {
  const std::string v0 = read_bytes(kV0);
  const std::string v1 = read_bytes(kV1);
  EXPECT_TRUE(fails(v0.substr(0, 10), "10 bytes, too short for a llama2.c header"));
  EXPECT_TRUE(fails(v0.substr(0, v0.size() - 4), "truncated"));
  EXPECT_TRUE(fails(v0 + "xxxx", "trailing data"));
  EXPECT_TRUE(fails(v1.substr(0, 100), "too short for the 256-byte version-1 header"));
  EXPECT_TRUE(fails(v1.substr(0, v1.size() - 1), "truncated"));
  std::string v2 = v1;
  v2[4] = 2;
  EXPECT_TRUE(fails(v2, "header field version = 2"));
  std::string flag = v1;
  flag[36] = 7;
  EXPECT_TRUE(fails(flag, "header field shared_classifier = 7"));
  EXPECT_TRUE(fails(header({24, 40, 2, 0, 2, 48, 12}), "header field n_heads = 0 is out of range"));
  EXPECT_TRUE(fails(header({24, 40, -2, 4, 2, 48, 12}), "header field n_layers = -2"));
  EXPECT_TRUE(
      fails(header({24, 40, 2, 5, 5, 48, 12}), "dim = 24 is not a multiple of n_heads = 5"));
  EXPECT_TRUE(fails(header({24, 40, 2, 4, 3, 48, 12}), "n_kv_heads = 3 does not divide n_heads"));
  EXPECT_TRUE(fails(header({12, 40, 2, 4, 2, 48, 12}), "head size dim / n_heads = 3 is odd"));
  EXPECT_TRUE(fails(header({1 << 30, 40, 2, 4, 2, 48, 12}), "header field dim = 1073741824"));
  // Random bytes: some field is out of range, or the size does not match.
  std::string noise(4096, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = char((i * 2654435761u) >> 13);
  write(noise);
  EXPECT_THROW(io::read_llama2c(path_), zenith::Error);
  EXPECT_TRUE(throws_with([&] { io::read_llama2c((dir_.path() / "none.bin").string()); },
                          "none.bin: cannot open"));
}

TEST_F(Llama2cErrors, ConvertOptions) {
  EXPECT_TRUE(throws_with([&] { models::convert_llama2c(kV0, dir_.str(), {.dtype = DType::i32}); },
                          "--dtype must be f32, bf16 or f16"));
  EXPECT_TRUE(throws_with(
      [&] { models::convert_llama2c(kV0, dir_.str(), {.tokenizer = "/nonexistent.model"}); },
      "tokenizer /nonexistent.model is not a file"));
}

}  // namespace
