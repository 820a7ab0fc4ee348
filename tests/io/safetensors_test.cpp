// safetensors: round trips of every dtype, files written by hand exactly as the Python
// reference writes them, and clear errors for corrupt or truncated files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/io.h"

namespace fs = std::filesystem;
using zenith::DType;
using zenith::Tensor;
using zenith::testing::throws_with;

namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_ / name; }

  // Writes an 8-byte little-endian header size, the header and the data.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                        int64_t header_size = -1) {
    std::string path = file(name);
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header_size < 0 ? header.size() : uint64_t(header_size);
    for (int i = 0; i < 8; ++i) out.put(char(n >> (8 * i)));
    out << header << data;
    return path;
  }

  zenith::testing::TempDir dir_{"safetensors"};
};

std::string bytes_of(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  std::map<std::string, Tensor> tensors;
  for (DType t :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    tensors[std::string("t_") + zenith::dtype_name(t)] =
        Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 250, 7}, {2, 4}, t);
  }
  Tensor b = Tensor::empty({3}, DType::b8);
  b.data<bool>()[0] = true;
  b.data<bool>()[1] = false;
  b.data<bool>()[2] = true;
  tensors["t_bool"] = b;
  tensors["scalar"] = Tensor::scalar(3.5);
  tensors["empty"] = Tensor::zeros({0, 4});
  // A non-contiguous view is written as its logical contents.
  tensors["transposed"] = Tensor::arange(6, DType::f32).reshape({2, 3}).t();
  zenith::io::Metadata meta{{"epoch", "3"}, {"arch", "seedcnn"}};
  std::string path = file("all.safetensors");
  zenith::io::save_safetensors(path, tensors, meta);

  zenith::io::Metadata got_meta;
  auto loaded = zenith::io::load_safetensors(path, &got_meta);
  EXPECT_EQ(got_meta, meta);
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(loaded.count(name)) << name;
    const Tensor& l = loaded.at(name);
    EXPECT_EQ(l.dtype(), t.dtype()) << name;
    EXPECT_EQ(l.shape(), t.shape()) << name;
    EXPECT_EQ(l.to_double_vector(), t.to_double_vector()) << name;
  }
  // The data section starts 8-byte aligned, like the reference writer's output.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  // No temporary file is left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(dir_.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(SafetensorsTest, ReadsAFileWrittenAsPythonWritesIt) {
  // safetensors.torch.save_file({"a": torch.tensor([1.5, -2.0]), "b": torch.tensor([[7]])},
  //                             metadata={"format": "pt"}) lays the file out like this.
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[1,1],"data_offsets":[8,16]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  float a[2] = {1.5f, -2.0f};
  int64_t b = 7;
  std::string path = write_raw("py.safetensors", header, bytes_of(a, 8) + bytes_of(&b, 8));
  zenith::io::Metadata meta;
  auto t = zenith::io::load_safetensors(path, &meta);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(t.at("a").to_double_vector(), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(t.at("b").shape(), (zenith::Shape{1, 1}));
  EXPECT_EQ(t.at("b").dtype(), DType::i64);
  EXPECT_EQ(t.at("b").item(), 7.0);
}

TEST_F(SafetensorsTest, WritesWhatTheReferenceReaderExpects) {
  std::string path = file("w.safetensors");
  zenith::io::save_safetensors(path, {{"w", Tensor::from_vector(std::vector<float>{1, 2}, {2})}});
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  uint64_t n = 0;
  std::memcpy(&n, all.data(), 8);
  auto header = nlohmann::json::parse(all.substr(8, n));
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["w"]["shape"], nlohmann::json::array({2}));
  EXPECT_EQ(header["w"]["data_offsets"], nlohmann::json::array({0, 8}));
  float v[2];
  std::memcpy(v, all.data() + 8 + n, 8);
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(all.size(), 8 + n + 8);
}

TEST_F(SafetensorsTest, CorruptFilesGiveErrorsNamingTheFile) {
  std::string ok_entry = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string data(8, '\0');
  std::string p;

  p = write_raw("short.safetensors", "", "", 0);
  fs::resize_file(p, 5);
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "short.safetensors"));

  p = write_raw("huge_header.safetensors", ok_entry, data, 1000);
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "runs past the end"));

  p = write_raw("json.safetensors", "{\"a\": [1, 2", "");
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "JSON at offset 8"));
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "json.safetensors"));

  p = write_raw("dtype.safetensors", R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})",
                std::string(2, '\0'));
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "unsupported dtype 'F8'"));

  p = write_raw("truncated.safetensors", ok_entry, std::string(5, '\0'));
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "past the end of the file"));
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "truncated.safetensors"));

  p = write_raw("count.safetensors", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                data);
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "needs 12"));

  p = write_raw("overlap.safetensors",
                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                data);
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "overlap"));

  p = write_raw("reversed.safetensors", R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})",
                data);
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "reversed"));

  p = write_raw("neg.safetensors", R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", "");
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "negative dimension"));

  p = write_raw("meta.safetensors", R"({"__metadata__":{"epoch":3}})", "");
  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(p); }, "not a string"));

  EXPECT_TRUE(throws_with([&] { zenith::io::load_safetensors(file("missing.safetensors")); },
                          "missing.safetensors: cannot open"));
}

TEST_F(SafetensorsTest, FailedSaveLeavesTheOldFileIntact) {
  std::string path = file("keep.safetensors");
  zenith::io::save_safetensors(path, {{"w", Tensor::ones({2})}});
  // A tensor named like the metadata key is rejected before anything is written.
  EXPECT_TRUE(throws_with(
      [&] {
        zenith::io::save_safetensors(path, {{"__metadata__", Tensor::zeros({2})}});
      },
      "invalid tensor name"));
  EXPECT_EQ(zenith::io::load_safetensors(path).at("w").to_double_vector(),
            (std::vector<double>{1, 1}));
  EXPECT_TRUE(
      throws_with([&] { zenith::io::save_safetensors(file("no/such/dir/x.safetensors"), {}); },
                  "no/such/dir/x.safetensors"));
}

}  // namespace
