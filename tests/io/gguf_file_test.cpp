// The GGUF container (src/io/gguf_file.h): every value type and array kind round trips, tensors
// land aligned with their bytes intact, and hostile files (truncated at any byte, lying lengths
// and counts, unknown types, misaligned or out-of-file tensors) fail with an error naming the
// file and what was expected, never a crash.
#include "io/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "support/op_check.h"
#include "support/temp_dir.h"

namespace gguf = zenith::io::gguf;
using zenith::DType;
using zenith::Tensor;
using zenith::testing::throws_with;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<std::pair<std::string, gguf::Value>> all_kinds() {
  using V = gguf::Value;
  return {{"general.architecture", V::str("llama")},
          {"k.u8", V::scalar(gguf::ValueType::u8, 200)},
          {"k.i8", V::scalar(gguf::ValueType::i8, -5)},
          {"k.u16", V::scalar(gguf::ValueType::u16, 60000)},
          {"k.i16", V::scalar(gguf::ValueType::i16, -300)},
          {"k.u32", V::u32(4000000000u)},
          {"k.i32", V::i32(-7)},
          {"k.f32", V::f32(0.25)},
          {"k.bool", V::boolean(true)},
          {"k.u64", V::u64(1ull << 40)},
          {"k.i64", V::scalar(gguf::ValueType::i64, -(1ll << 40))},
          {"k.f64",
           [] {
             V v = V::f32(0.1);
             v.type = gguf::ValueType::f64;
             return v;
           }()},
          {"k.strings", V::string_array({"a", "", "\xE2\x96\x81hello"})},
          {"k.floats", V::f32_array({1.5, -2})},
          {"k.ints", V::i32_array({1, -2, 3})}};
}

class GgufFileTest : public ::testing::Test {
 protected:
  // A file with every value kind and three tensors (f32 [2, 3], f16 [5], bf16 [1, 2, 3]).
  std::string write_sample(const std::string& name = "sample.gguf") {
    std::vector<gguf::OutTensor> t;
    t.push_back(
        {"a", {3, 2}, gguf::TensorType::f32, Tensor::arange(6).to(DType::f32).view({2, 3})});
    t.push_back({"b", {5}, gguf::TensorType::f16, Tensor::randn({5}).to(DType::f16)});
    t.push_back({"c", {3, 2, 1}, gguf::TensorType::bf16, Tensor::randn({1, 2, 3}).to(DType::bf16)});
    tensors_ = t;
    gguf::write_file(dir_ / name, all_kinds(), t);
    return dir_ / name;
  }
  zenith::testing::TempDir dir_{"gguf"};
  std::vector<gguf::OutTensor> tensors_;
};

TEST_F(GgufFileTest, ValuesAndTensorsRoundTrip) {
  const gguf::File f = gguf::read_file(write_sample());
  EXPECT_EQ(f.version, 3u);
  const auto expected = all_kinds();
  ASSERT_EQ(f.metadata.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [key, want] = expected[i];
    const gguf::Value& got = f.metadata[i].second;
    EXPECT_EQ(f.metadata[i].first, key);
    EXPECT_EQ(got.type, want.type) << key;
    EXPECT_EQ(got.i, want.i) << key;
    EXPECT_EQ(got.s, want.s) << key;
    EXPECT_EQ(got.strings, want.strings) << key;
    EXPECT_EQ(got.ints, want.ints) << key;
    if (want.type == gguf::ValueType::f64) EXPECT_EQ(got.f, 0.1) << key;
    if (want.type == gguf::ValueType::f32) EXPECT_EQ(float(got.f), float(want.f)) << key;
    if (!want.floats.empty()) EXPECT_EQ(got.floats, want.floats) << key;
  }
  EXPECT_EQ(f.get_int("k.u32"), 4000000000ll);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_TRUE(
      throws_with([&] { f.get_string("k.u32"); }, "k.u32 is of type u32, expected a string"));
  EXPECT_TRUE(throws_with([&] { f.get_int("no.such"); }, "no.such is missing"));
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.data_offset % 32, 0u);
  for (size_t i = 0; i < 3; ++i) {
    const gguf::TensorEntry& e = f.tensors[i];
    EXPECT_EQ(e.name, tensors_[i].name);
    EXPECT_EQ(e.offset % 32, 0u);
    EXPECT_EQ(e.shape(), tensors_[i].data.shape());
    Tensor back = gguf::read_tensor(f, e);
    ASSERT_EQ(back.dtype(), tensors_[i].data.dtype());
    EXPECT_EQ(std::memcmp(back.raw_data(), tensors_[i].data.contiguous().raw_data(), back.nbytes()),
              0)
        << e.name;
  }
}

TEST_F(GgufFileTest, OtherAlignmentIsWrittenAndHonoured) {
  std::vector<gguf::OutTensor> t = {{"x", {3}, gguf::TensorType::f32, Tensor::ones({3})},
                                    {"y", {2}, gguf::TensorType::f32, Tensor::full({2}, 2.0)}};
  gguf::write_file(dir_ / "a64.gguf", {}, t, 64);
  const gguf::File f = gguf::read_file(dir_ / "a64.gguf");
  EXPECT_EQ(f.alignment, 64u);
  EXPECT_EQ(f.get_int("general.alignment"), 64);
  EXPECT_EQ(f.tensors[1].offset, 64u);
  EXPECT_EQ(gguf::read_tensor(f, f.tensors[1]).to_double_vector(), std::vector<double>({2, 2}));
}

TEST_F(GgufFileTest, WrongByteCountFailsNamingTheTensor) {
  std::vector<gguf::OutTensor> t = {{"w", {4, 2}, gguf::TensorType::f32, Tensor::ones({3})}};
  EXPECT_TRUE(throws_with([&] { gguf::write_file(dir_ / "bad.gguf", {}, t); },
                          "tensor w has 12 bytes, its type f32 and dims need 32"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad.gguf"));
}

TEST_F(GgufFileTest, EveryTruncationFailsCleanly) {
  const std::string path = write_sample();
  const std::string bytes = slurp(path);
  // Up to the end of the last tensor's data (the padding after it is not needed).
  const gguf::File f = gguf::read_file(path);
  const size_t needed = f.data_offset + f.tensors.back().offset + f.tensors.back().nbytes;
  ASSERT_LE(needed, bytes.size());
  const std::string cut = dir_ / "cut.gguf";
  for (size_t n = 0; n < needed; ++n) {
    spit(cut, bytes.substr(0, n));
    EXPECT_TRUE(throws_with([&] { gguf::read_file(cut); }, cut)) << "cut at " << n;
  }
}

// Random bytes of the header and metadata changed: every file either reads (and its tensors
// read or fail cleanly) or fails with zenith's error naming the file; nothing crashes.
TEST_F(GgufFileTest, MutatedFilesNeverCrash) {
  const std::string path = write_sample();
  const std::string good = slurp(path);
  const gguf::File f = gguf::read_file(path);
  const std::string evil = dir_ / "mutated.gguf";
  uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (int round = 0; round < 400; ++round) {
    std::string b = good;
    const int changes = 1 + int(next() >> 62);
    for (int c = 0; c < changes; ++c) b[(next() >> 33) % f.data_offset] = char(next() >> 56);
    spit(evil, b);
    try {
      const gguf::File m = gguf::read_file(evil);
      for (const auto& t : m.tensors) {
        try {
          gguf::read_tensor_bytes(m, t);
        } catch (const zenith::Error& e) {
          EXPECT_NE(std::string(e.what()).find(evil), std::string::npos) << e.what();
        }
      }
    } catch (const zenith::Error& e) {
      EXPECT_NE(std::string(e.what()).find(evil), std::string::npos) << e.what();
    }
  }
}

// Offsets into the sample's header, found by searching for the bytes around them.
size_t find(const std::string& bytes, const std::string& needle) {
  size_t at = bytes.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return at;
}
void put_u64(std::string& bytes, size_t at, uint64_t v) { std::memcpy(&bytes[at], &v, 8); }
void put_u32(std::string& bytes, size_t at, uint32_t v) { std::memcpy(&bytes[at], &v, 4); }

TEST_F(GgufFileTest, HostileHeadersFailNamingWhatIsWrong) {
  const std::string good = slurp(write_sample());
  const std::string path = dir_ / "evil.gguf";
  auto expect = [&](std::string bytes, const std::string& needle) {
    spit(path, bytes);
    EXPECT_TRUE(throws_with([&] { gguf::read_file(path); }, needle)) << needle;
  };
  std::string b = good;
  b[0] = 'X';
  expect(b, "is not a GGUF file");
  b = good;
  put_u32(b, 4, 4);
  expect(b, "GGUF version 4 is not supported");
  b = good;
  put_u64(b, 16, 1ull << 60);  // key count
  expect(b, "more than its");
  b = good;
  put_u64(b, 24, 1ull << 62);  // length of the first key
  expect(b, "says it is");
  b = good;
  put_u32(b, find(b, "k.u8") + 4, 99);  // the value type after "k.u8"
  expect(b, "k.u8 has unknown value type 99");
  b = good;
  put_u64(b, find(b, "k.strings") + 9 + 8, 1ull << 50);  // the array's length
  expect(b, "k.strings says it holds");
  b = good;
  // tensor "a": name (8 + 1), n_dims (4), dims (2 x 8), type (4), offset (8)
  const size_t a = b.rfind(std::string("\x01\0\0\0\0\0\0\0a", 9)) + 9;  // not k.strings' "a"
  put_u32(b, a, 5);
  expect(b, "tensor a has 5 dims, expected 1 to 4");
  b = good;
  put_u32(b, a + 4 + 16, 77);  // an unknown ggml type is listed, its data not read
  spit(path, b);
  const gguf::File f = gguf::read_file(path);
  EXPECT_TRUE(throws_with([&] { gguf::read_tensor_bytes(f, f.tensors[0]); },
                          "tensor a is of ggml type 77, which zenith does not read"));
  b = good;
  put_u64(b, a + 4 + 16 + 4, 3);
  expect(b, "tensor a starts at data offset 3, not a multiple of the alignment 32");
  b = good;
  put_u64(b, a + 4 + 16 + 4, 1ull << 40);
  expect(b, "lies past the end of the file");
  b = good;
  put_u64(b, a + 4, 0);
  expect(b, "tensor a has dim 0 of 0");
}

}  // namespace
