// TensorBoard event files. A file is a sequence of TFRecords:
//   uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
// (little-endian), each data an Event protocol buffer (tensorflow/core/util/event.proto):
//   Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
// The first event carries file_version "brain.Event:2".
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.h"
#include "io/protobuf_lite.h"
#include "zenith/io.h"

namespace zenith::io {

namespace {

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), table-driven.
const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
      t[i] = c;
    }
    return t;
  }();
  return table;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string event(double wall_time, int64_t step) {
  std::string e;
  pb::put_fixed64(e, 1, wall_time);
  pb::put_int64(e, 2, step);
  return e;
}

uint32_t read_le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto& table = crc32c_table();
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

SummaryWriter::SummaryWriter(const std::string& logdir) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  ZENITH_CHECK(!ec, "[tensorboard] ", logdir, ": cannot create directory: ", ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  double t = now_seconds();
  // Two writers in one second in one process must not share a file.
  for (int n = 0;; ++n) {
    std::string name = "events.out.tfevents." + std::to_string(int64_t(t)) + "." + host + "." +
                       std::to_string(::getpid());
    if (n > 0) name.append(".").append(std::to_string(n));
    path_ = (std::filesystem::path(logdir) / name).string();
    file_ = std::fopen(path_.c_str(), "wbx");
    if (file_ || errno != EEXIST) break;
  }
  ZENITH_CHECK(file_, "[tensorboard] ", path_, ": cannot create: ", std::strerror(errno));
  std::string e = event(t, 0);
  pb::put_bytes(e, 3, "brain.Event:2");
  write_record(e);
  flush();
}

SummaryWriter::~SummaryWriter() {
  if (file_) std::fclose(file_);
}

void SummaryWriter::write_record(const std::string& data) {
  char header[12];
  uint64_t n = data.size();
  std::memcpy(header, &n, 8);
  uint32_t len_crc = masked_crc32c(header, 8);
  std::memcpy(header + 8, &len_crc, 4);
  uint32_t data_crc = masked_crc32c(data.data(), data.size());
  bool ok = std::fwrite(header, 1, 12, file_) == 12 &&
            std::fwrite(data.data(), 1, data.size(), file_) == data.size() &&
            std::fwrite(&data_crc, 1, 4, file_) == 4;
  ZENITH_CHECK(ok, "[tensorboard] ", path_, ": write failed: ", std::strerror(errno));
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step,
                               double wall_time) {
  std::string v;
  pb::put_bytes(v, 1, tag);
  pb::put_fixed32(v, 2, float(value));
  std::string summary;
  pb::put_bytes(summary, 1, v);
  std::string e = event(wall_time < 0 ? now_seconds() : wall_time, step);
  pb::put_bytes(e, 5, summary);
  write_record(e);
  flush();
}

void SummaryWriter::flush() {
  ZENITH_CHECK(std::fflush(file_) == 0, "[tensorboard] ", path_,
               ": flush failed: ", std::strerror(errno));
}

std::vector<std::string> read_tfrecords(const std::string& path) {
  std::string bytes = core::read_file(path, "tensorboard");
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < bytes.size()) {
    ZENITH_CHECK(bytes.size() - pos >= 12, "[tensorboard] ", path,
                 ": truncated record header at "
                 "offset ",
                 pos);
    uint64_t n;
    std::memcpy(&n, bytes.data() + pos, 8);
    ZENITH_CHECK(read_le32(bytes.data() + pos + 8) == masked_crc32c(bytes.data() + pos, 8),
                 "[tensorboard] ", path, ": bad length CRC at offset ", pos + 8);
    ZENITH_CHECK(n <= bytes.size() - pos - 12 && bytes.size() - pos - 12 - n >= 4, "[tensorboard] ",
                 path, ": record of ", n, " bytes at offset ", pos, " is truncated");
    const char* data = bytes.data() + pos + 12;
    ZENITH_CHECK(read_le32(data + n) == masked_crc32c(data, n), "[tensorboard] ", path,
                 ": bad data CRC at offset ", pos + 12 + n);
    records.emplace_back(data, n);
    pos += 12 + n + 4;
  }
  return records;
}

std::vector<ScalarEvent> read_scalar_events(const std::string& path, std::string* file_version) {
  std::vector<ScalarEvent> out;
  bool first = true;
  for (const auto& record : read_tfrecords(path)) {
    pb::Reader ev(record, path);
    double wall_time = 0;
    int64_t step = 0;
    std::vector<ScalarEvent> values;
    while (!ev.done()) {
      uint32_t field;
      pb::WireType type;
      ev.next(&field, &type);
      if (field == 1 && type == pb::kFixed64) {
        wall_time = ev.fixed64();
      } else if (field == 2 && type == pb::kVarint) {
        step = int64_t(ev.varint());
      } else if (field == 3 && type == pb::kLengthDelimited) {
        auto v = ev.length_delimited();
        if (first && file_version) *file_version = std::string(v);
      } else if (field == 5 && type == pb::kLengthDelimited) {
        pb::Reader summary(ev.length_delimited(), path);
        while (!summary.done()) {
          summary.next(&field, &type);
          if (field != 1 || type != pb::kLengthDelimited) {
            summary.skip(type);
            continue;
          }
          pb::Reader value(summary.length_delimited(), path);
          ScalarEvent s;
          bool scalar = false;
          while (!value.done()) {
            value.next(&field, &type);
            if (field == 1 && type == pb::kLengthDelimited) {
              s.tag = std::string(value.length_delimited());
            } else if (field == 2 && type == pb::kFixed32) {
              s.value = value.fixed32();
              scalar = true;
            } else {
              value.skip(type);
            }
          }
          if (scalar) values.push_back(s);
        }
      } else {
        ev.skip(type);
      }
    }
    for (auto& v : values) {
      v.step = step;
      v.wall_time = wall_time;
      out.push_back(std::move(v));
    }
    first = false;
  }
  return out;
}

}  // namespace zenith::io
