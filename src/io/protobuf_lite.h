// Just enough of the protocol buffer wire format for TensorBoard events: varints, fixed
// 32/64-bit fields and length-delimited fields, written and read by hand.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "zenith/error.h"

namespace zenith::io::pb {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

inline void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
inline void put_tag(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (uint64_t(field) << 3) | type);
}
inline void put_fixed64(std::string& out, uint32_t field, double v) {
  put_tag(out, field, kFixed64);
  char b[8];
  std::memcpy(b, &v, 8);  // little-endian host
  out.append(b, 8);
}
inline void put_fixed32(std::string& out, uint32_t field, float v) {
  put_tag(out, field, kFixed32);
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}
inline void put_int64(std::string& out, uint32_t field, int64_t v) {
  put_tag(out, field, kVarint);
  put_varint(out, uint64_t(v));
}
inline void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Reads fields one by one; errors name `what` (the file) and the field's offset.
class Reader {
 public:
  Reader(std::string_view data, const std::string& what) : data_(data), what_(what) {}
  bool done() const { return pos_ >= data_.size(); }
  // The next field's number and wire type.
  void next(uint32_t* field, WireType* type) {
    uint64_t key = varint();
    *field = uint32_t(key >> 3);
    *type = WireType(key & 7);
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      ZENITH_CHECK(pos_ < data_.size(), "[protobuf] ", what_, ": varint runs past the end");
      uint8_t b = uint8_t(data_[pos_++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ZENITH_FAIL("[protobuf] ", what_, ": varint longer than 10 bytes at offset ", pos_);
  }
  std::string_view bytes(size_t n) {
    ZENITH_CHECK(n <= data_.size() - pos_, "[protobuf] ", what_, ": field of ", n,
                 " bytes at offset ", pos_, " runs past the end");
    std::string_view v = data_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  double fixed64() {
    double v;
    std::memcpy(&v, bytes(8).data(), 8);
    return v;
  }
  float fixed32() {
    float v;
    std::memcpy(&v, bytes(4).data(), 4);
    return v;
  }
  std::string_view length_delimited() { return bytes(size_t(varint())); }
  void skip(WireType type) {
    switch (type) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        bytes(8);
        return;
      case kLengthDelimited:
        length_delimited();
        return;
      case kFixed32:
        bytes(4);
        return;
    }
    ZENITH_FAIL("[protobuf] ", what_, ": unsupported wire type ", int(type), " at offset ", pos_);
  }

 private:
  std::string_view data_;
  const std::string& what_;
  size_t pos_ = 0;
};

}  // namespace zenith::io::pb
