// TensorBoard event files: TFRecord framing with masked CRC32C, Event protos written by hand,
// read back with the small reader.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/protobuf_lite.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/io.h"

namespace fs = std::filesystem;
using zenith::testing::throws_with;

namespace {

using zenith::testing::TempDir;

TEST(TensorBoard, Crc32cKnownValues) {
  // The CRC-32C check value, and RFC 3720's 32 zero bytes.
  EXPECT_EQ(zenith::io::crc32c("123456789", 9), 0xe3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(zenith::io::crc32c(zeros.data(), 32), 0x8a9136aau);
  uint32_t crc = zenith::io::crc32c("123456789", 9);
  EXPECT_EQ(zenith::io::masked_crc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, VarintsAndFieldsMatchTheWireFormat) {
  std::string s;
  zenith::io::pb::put_varint(s, 300);
  EXPECT_EQ(s, std::string("\xac\x02", 2));
  s.clear();
  zenith::io::pb::put_int64(s, 2, 150);  // the protobuf docs' example: 08 96 01 for field 1
  EXPECT_EQ(s, std::string("\x10\x96\x01", 3));
  s.clear();
  zenith::io::pb::put_bytes(s, 1, "loss");
  EXPECT_EQ(s, std::string("\x0a\x04loss", 6));
  s.clear();
  zenith::io::pb::put_fixed32(s, 2, 1.0f);
  EXPECT_EQ(s, std::string("\x15\x00\x00\x80\x3f", 5));
}

TEST(TensorBoard, WritesScalarsThatReadBack) {
  TempDir dir("tensorboard");
  std::string path;
  {
    zenith::io::SummaryWriter w(dir / "summary");
    path = w.path();
    w.add_scalar("loss", 0.25, 1, 1000.5);
    w.add_scalar("accuracy", 0.875, 2, 1001.0);
    w.add_scalar("learning_rate", 0.01, 2);
    // Flushed as written: a reader sees the events before the writer closes.
    EXPECT_EQ(zenith::io::read_scalar_events(path).size(), 3u);
  }
  std::string name = fs::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find("." + std::to_string(::getpid())), std::string::npos);

  std::string version;
  auto events = zenith::io::read_scalar_events(path, &version);
  EXPECT_EQ(version, "brain.Event:2");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].tag, "loss");
  EXPECT_EQ(events[0].value, 0.25);
  EXPECT_EQ(events[0].step, 1);
  EXPECT_EQ(events[0].wall_time, 1000.5);
  EXPECT_EQ(events[1].tag, "accuracy");
  EXPECT_FLOAT_EQ(events[2].value, 0.01f);
  EXPECT_GT(events[2].wall_time, 1.6e9);

  // The second record byte for byte: the Event {wall_time: 1000.5, step: 1,
  // summary {value {tag: "loss", simple_value: 0.25}}}.
  auto records = zenith::io::read_tfrecords(path);
  ASSERT_EQ(records.size(), 4u);
  double wt = 1000.5;
  std::string expected("\x09", 1);
  expected.append(reinterpret_cast<const char*>(&wt), 8);
  expected += std::string("\x10\x01\x2a\x0d\x0a\x0b\x0a\x04loss\x15\x00\x00\x80\x3e", 17);
  EXPECT_EQ(records[1], expected);
}

TEST(TensorBoard, CorruptFilesAreDetected) {
  TempDir dir("tensorboard");
  std::string path;
  {
    zenith::io::SummaryWriter w(dir.str());
    path = w.path();
    w.add_scalar("loss", 1.0, 0);
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& b) { std::ofstream(path, std::ios::binary) << b; };
  std::string flipped = bytes;
  flipped[flipped.size() - 6] ^= 1;
  write(flipped);
  EXPECT_TRUE(throws_with([&] { zenith::io::read_tfrecords(path); }, "bad data CRC"));
  write(bytes.substr(0, bytes.size() - 3));
  EXPECT_TRUE(throws_with([&] { zenith::io::read_tfrecords(path); }, "truncated"));
  flipped = bytes;
  flipped[0] ^= 1;
  write(flipped);
  EXPECT_TRUE(throws_with([&] { zenith::io::read_tfrecords(path); }, "bad length CRC at offset 8"));
}

}  // namespace
