// Hugging Face model weights: safetensors listed from the header alone and read in their storage
// dtype, save_pretrained-shaped directories (one file or shards + index) written and read
// bit-exactly, a directory written by an independent (Python) writer, and clean errors for
// missing shards, bad indexes and files truncated anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "support/files.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "support/tensor_bits.h"
#include "zenith/hf.h"
#include "zenith/llama_config.h"

namespace fs = std::filesystem;
using zenith::DType;
using zenith::Tensor;
using zenith::testing::read_bytes;
using zenith::testing::read_json;
using zenith::testing::same_bits;
using zenith::testing::same_state;
using zenith::testing::TempDir;
using zenith::testing::throws_with;
using zenith::testing::write_bytes;
namespace io = zenith::io;

namespace {

const fs::path kFixtures = fs::path(ZENITH_FIXTURE_DIR) / "llm_io";

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A LLaMA-shaped state in mixed storage dtypes: bf16 matrices, f32 norms, one f16 tensor.
std::map<std::string, Tensor> llama_like_state(int layers) {
  std::map<std::string, Tensor> s;
  s["model.embed_tokens.weight"] = Tensor::randn({32, 16}).to(DType::bf16);
  for (int i = 0; i < layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    s[p + "self_attn.q_proj.weight"] = Tensor::randn({16, 16}).to(DType::bf16);
    s[p + "mlp.up_proj.weight"] = Tensor::randn({24, 16}).to(DType::f16);
    s[p + "input_layernorm.weight"] = Tensor::randn({16});
  }
  s["model.norm.weight"] = Tensor::randn({16});
  return s;
}

TEST(Safetensors, ListsFromTheHeaderAndReadsInTheStorageDtype) {
  TempDir dir("st_list");
  std::string path = (dir.path() / "w.safetensors").string();
  auto state = llama_like_state(1);
  io::save_safetensors(path, state, {{"format", "pt"}});
  io::Metadata meta;
  auto infos = io::list_safetensors(path, &meta);
  EXPECT_EQ(meta.at("format"), "pt");
  ASSERT_EQ(infos.size(), state.size());
  uint64_t end = 0;
  for (const auto& info : infos) {
    const Tensor& t = state.at(info.name);
    EXPECT_EQ(info.dtype, t.dtype()) << info.name;
    EXPECT_EQ(info.shape, t.shape()) << info.name;
    EXPECT_EQ(info.nbytes, t.nbytes()) << info.name;
    EXPECT_EQ(info.file, path);
    EXPECT_TRUE(same_bits(io::read_tensor(info), t)) << info.name;
    end = std::max(end, info.offset + info.nbytes);
  }
  EXPECT_EQ(end, fs::file_size(path));  // offsets are absolute
  EXPECT_TRUE(std::is_sorted(infos.begin(), infos.end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
  // bf16 and f16 stay in their storage type and round-trip their bits.
  EXPECT_TRUE(same_state(io::load_safetensors(path), state));
  EXPECT_EQ(io::load_safetensors(path).at("model.embed_tokens.weight").dtype(), DType::bf16);
}

TEST(Safetensors, EveryTruncationIsACleanErrorNamingTheFile) {
  TempDir dir("st_trunc");
  fs::path whole = dir.path() / "whole.safetensors";
  io::save_safetensors(whole.string(),
                       {{"a", Tensor::randn({3, 5})},
                        {"b", Tensor::randn({7}).to(DType::bf16)},
                        {"c", Tensor::zeros({0, 2})}},
                       {{"format", "pt"}});
  const std::string bytes = read_bytes(whole);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const size_t data_start = 8 + header;
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= data_start; ++n) lengths.push_back(n);  // every header byte
  for (size_t n = data_start + 1; n < bytes.size(); n += 5) lengths.push_back(n);
  lengths.push_back(bytes.size() - 1);
  fs::path cut = dir.path() / "cut.safetensors";
  for (size_t n : lengths) {
    write_bytes(cut, bytes.substr(0, n));
    EXPECT_TRUE(throws_with([&] { io::load_safetensors(cut.string()); }, cut.string()))
        << "truncated to " << n << " of " << bytes.size() << " bytes";
    EXPECT_TRUE(throws_with([&] { io::list_safetensors(cut.string()); }, cut.string()))
        << "truncated to " << n;
  }
  // A file cut after it was listed fails when read, naming it.
  write_bytes(cut, bytes);
  auto infos = io::list_safetensors(cut.string());
  write_bytes(cut, bytes.substr(0, bytes.size() - 4));
  EXPECT_TRUE(throws_with([&] { io::read_tensors(infos); }, "truncated?"));
}

TEST(Safetensors, CorruptHeaderBytesNeverCrash) {
  TempDir dir("st_fuzz");
  fs::path whole = dir.path() / "whole.safetensors";
  io::save_safetensors(whole.string(), {{"a", Tensor::randn({2, 3})}, {"b", Tensor::randn({4})}});
  const std::string bytes = read_bytes(whole);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  fs::path bad = dir.path() / "bad.safetensors";
  int errors = 0;
  for (size_t i = 0; i < 8 + header; ++i) {
    for (char c : {'\0', '"', '9', '}', '-', char(0xff)}) {
      std::string b = bytes;
      b[i] = c;
      write_bytes(bad, b);
      try {
        io::load_safetensors(bad.string());  // some edits stay valid (a digit in a digit)
      } catch (const zenith::Error& e) {
        ++errors;
        EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GT(errors, 100);
}

TEST(HfState, OneFileWhenItFitsShardsOtherwiseAllBitExact) {
  TempDir dir("hf_shards");
  auto state = llama_like_state(12);
  uint64_t total = 0;
  for (const auto& [n, t] : state) total += t.nbytes();

  fs::path single = dir.path() / "single";
  io::save_hf_state(single.string(), state);
  EXPECT_EQ(files_in(single), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(io::read_safetensors_metadata((single / "model.safetensors").string()).at("format"),
            "pt");

  fs::path sharded = dir.path() / "sharded";
  io::save_hf_state(sharded.string(), state, 2000);
  nlohmann::json index = read_json(sharded / "model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"], total);
  const auto& map = index["weight_map"];
  EXPECT_EQ(map.size(), state.size());
  std::set<std::string> shards;
  for (const auto& [name, file] : map.items()) shards.insert(file.get<std::string>());
  ASSERT_GT(shards.size(), 2u);
  char expect[64];
  std::snprintf(expect, sizeof(expect), "model-00001-of-%05zu.safetensors", shards.size());
  EXPECT_EQ(*shards.begin(), expect);
  std::vector<std::string> want_files(shards.begin(), shards.end());
  want_files.push_back("model.safetensors.index.json");
  std::sort(want_files.begin(), want_files.end());
  EXPECT_EQ(files_in(sharded), want_files);  // no temporary files left
  for (const auto& shard : shards) {
    uint64_t bytes = 0;
    for (const auto& info : io::list_safetensors((sharded / shard).string())) bytes += info.nbytes;
    EXPECT_LE(bytes, 2000u) << shard;
    EXPECT_EQ(io::read_safetensors_metadata((sharded / shard).string()).at("format"), "pt");
  }
  // Shards follow the model's order: layer 2's tensors come before layer 10's.
  EXPECT_LE(map["model.layers.2.mlp.up_proj.weight"].get<std::string>(),
            map["model.layers.10.mlp.up_proj.weight"].get<std::string>());
  EXPECT_EQ(map["model.embed_tokens.weight"], expect);

  auto a = io::load_hf_state(single.string());
  auto b = io::load_hf_state(sharded.string());
  EXPECT_TRUE(same_state(a, state));
  EXPECT_TRUE(same_state(b, state));
  // Export -> import -> export gives the same bytes.
  fs::path again = dir.path() / "again";
  io::save_hf_state(again.string(), b);
  EXPECT_EQ(read_bytes(again / "model.safetensors"), read_bytes(single / "model.safetensors"));
}

TEST(HfState, ATensorLargerThanTheLimitGetsAShardOfItsOwn) {
  TempDir dir("hf_big");
  std::map<std::string, Tensor> state = {
      {"a.1", Tensor::randn({10})}, {"a.2", Tensor::randn({100})}, {"a.3", Tensor::randn({10})}};
  io::save_hf_state(dir.str(), state, 100);  // 40, 400, 40 bytes
  auto map = read_json(dir.path() / "model.safetensors.index.json")["weight_map"];
  EXPECT_EQ(map["a.1"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(map["a.2"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(map["a.3"], "model-00003-of-00003.safetensors");
  EXPECT_TRUE(same_state(io::load_hf_state(dir.str()), state));
}

TEST(HfState, ASaveReplacesWhatAnEarlierSaveLeft) {
  TempDir dir("hf_resave");
  auto big = llama_like_state(6);
  io::save_hf_state(dir.str(), big, 1000);
  const size_t many = files_in(dir.path()).size();
  ASSERT_GT(many, 3u);
  write_bytes(dir.path() / "config.json", "{}");  // not weights: kept

  auto small = llama_like_state(1);
  io::save_hf_state(dir.str(), small);
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_TRUE(same_state(io::load_hf_state(dir.str()), small));

  // Back to shards (the stale model.safetensors would otherwise shadow the index), then to a
  // different shard count with the same first names.
  io::save_hf_state(dir.str(), big, 1000);
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors"));
  EXPECT_TRUE(same_state(io::load_hf_state(dir.str()), big));
  io::save_hf_state(dir.str(), big, 3000);
  EXPECT_LT(files_in(dir.path()).size(), many);
  EXPECT_TRUE(same_state(io::load_hf_state(dir.str()), big));
  // The same shard names with new contents (the old index goes first).
  auto big2 = llama_like_state(6);
  io::save_hf_state(dir.str(), big2, 3000);
  EXPECT_TRUE(same_state(io::load_hf_state(dir.str()), big2));
  for (const auto& name : files_in(dir.path())) EXPECT_NE(name[0], '.') << name;
}

TEST(HfState, ReadsADirectoryWrittenTheWaySavePretrainedWritesIt) {
  // scripts/make_llm_io_fixtures.py: a bf16 Qwen2 in two shards + index, written in Python.
  const std::string dir = (kFixtures / "hf_qwen2_sharded").string();
  auto infos = io::list_hf_state(dir);
  ASSERT_EQ(infos.size(), 26u);
  for (const auto& info : infos) EXPECT_EQ(info.dtype, DType::bf16) << info.name;
  auto config = zenith::models::load_llama_config(dir);
  EXPECT_EQ(config.model_type, "qwen2");
  zenith::models::check_llama_state(config, infos, dir);

  auto state = io::load_hf_state(dir);
  auto reference = io::load_safetensors((kFixtures / "hf_qwen2_reference.safetensors").string());
  ASSERT_EQ(state.size(), reference.size());
  for (const auto& [name, t] : state) {
    EXPECT_EQ(t.dtype(), DType::bf16) << name;
    EXPECT_TRUE(same_bits(t.to(DType::f32), reference.at(name))) << name;  // bf16 -> f32 is exact
  }
  // Written back by zenith (one file, then shards) it reads the same.
  TempDir out("hf_qwen2_out");
  io::save_hf_state(out.str(), state, 1500);
  EXPECT_TRUE(same_state(io::load_hf_state(out.str()), state));
  // The same index but for where the shards split: transformers fills them in module order
  // (q, k, v, o, mlp, norms), zenith in name order.
  auto ours = read_json(out.path() / "model.safetensors.index.json");
  auto theirs = read_json(kFixtures / "hf_qwen2_sharded" / "model.safetensors.index.json");
  EXPECT_EQ(ours["metadata"], theirs["metadata"]);
  for (const auto& [name, file] : theirs["weight_map"].items())
    EXPECT_TRUE(ours["weight_map"].contains(name)) << name;
  EXPECT_EQ(ours["weight_map"].size(), theirs["weight_map"].size());
}

class HfStateErrors : public ::testing::Test {
 protected:
  void SetUp() override { io::save_hf_state(dir_.str(), llama_like_state(4), 1000); }
  fs::path index() const { return dir_.path() / "model.safetensors.index.json"; }
  nlohmann::json index_json() const { return read_json(index()); }
  void write_index(const nlohmann::json& j) { write_bytes(index(), j.dump()); }
  // The i-th shard file the index names.
  std::string shard(size_t i) const {
    const nlohmann::json index = index_json();
    std::set<std::string> files;
    for (const auto& [name, file] : index["weight_map"].items()) files.insert(file);
    if (files.size() <= i) ADD_FAILURE() << "only " << files.size() << " shards";
    return files.size() <= i ? "" : *std::next(files.begin(), std::ptrdiff_t(i));
  }
  TempDir dir_{"hf_errors"};
};

TEST_F(HfStateErrors, MissingShardNamesItAndTheIndex) {
  const std::string missing = shard(1);
  fs::remove(dir_.path() / missing);
  EXPECT_TRUE(
      throws_with([&] { io::load_hf_state(dir_.str()); }, index().string() + ": shard " + missing));
  EXPECT_TRUE(throws_with([&] { io::list_hf_state(dir_.str()); }, "is missing from"));
}

TEST_F(HfStateErrors, TruncatedShardNamesTheShard) {
  fs::path file = dir_.path() / shard(2);
  std::string bytes = read_bytes(file);
  write_bytes(file, bytes.substr(0, bytes.size() - 3));
  EXPECT_TRUE(throws_with([&] { io::load_hf_state(dir_.str()); }, file.string() + ": tensor"));
}

TEST_F(HfStateErrors, IndexKeysAndTypes) {
  auto j = index_json();
  j.erase("weight_map");
  write_index(j);
  EXPECT_TRUE(throws_with([&] { io::list_hf_state(dir_.str()); },
                          "model.safetensors.index.json: key 'weight_map' is missing"));
  write_index({{"weight_map", nlohmann::json::array()}});
  EXPECT_TRUE(
      throws_with([&] { io::list_hf_state(dir_.str()); }, "key 'weight_map' must be an object"));
  write_index({{"weight_map", {{"model.norm.weight", 3}}}});
  EXPECT_TRUE(throws_with([&] { io::list_hf_state(dir_.str()); },
                          "entry 'model.norm.weight' must be a file name, got 3 (an integer)"));
  write_index({{"weight_map", {{"model.norm.weight", "../x.safetensors"}}}});
  EXPECT_TRUE(throws_with([&] { io::list_hf_state(dir_.str()); }, "not a file in the model"));
  write_bytes(index(), "{\"weight_map\": {");
  EXPECT_TRUE(throws_with([&] { io::list_hf_state(dir_.str()); }, "invalid JSON"));
}

TEST_F(HfStateErrors, IndexAndShardsMustAgree) {
  const nlohmann::json good = index_json();
  auto j = good;
  j["weight_map"]["model.extra.weight"] = shard(0);
  write_index(j);
  EXPECT_TRUE(
      throws_with([&] { io::list_hf_state(dir_.str()); },
                  "maps tensor 'model.extra.weight' to " + shard(0) + ", which does not hold it"));
  j = good;
  j["weight_map"].erase("model.norm.weight");
  write_index(j);
  EXPECT_TRUE(throws_with([&] { io::list_hf_state(dir_.str()); },
                          "holds tensor 'model.norm.weight', which "
                          "model.safetensors.index.json does not list"));
  write_index(good);
  EXPECT_EQ(io::list_hf_state(dir_.str()).size(), llama_like_state(4).size());
}

TEST(HfStateDir, NoWeightsAtAll) {
  TempDir dir("hf_empty");
  EXPECT_TRUE(throws_with([&] { io::load_hf_state(dir.str()); },
                          "no model.safetensors or model.safetensors.index.json"));
  write_bytes(dir.path() / "pytorch_model.bin", "PK");
  EXPECT_TRUE(throws_with([&] { io::load_hf_state(dir.str()); }, "pytorch_model.bin"));
  EXPECT_TRUE(
      throws_with([&] { io::load_hf_state((dir.path() / "nope").string()); }, "not a directory"));
}

}  // namespace
