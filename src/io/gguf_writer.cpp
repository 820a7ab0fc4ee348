// GGUF v3 container: atomic writing (src/io/gguf_file.h).
#include <cstring>

#include "core/atomic_file.h"
#include "io/gguf_file.h"
#include "zenith/error.h"

namespace zenith::io::gguf {
namespace {

void put(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
template <typename T>
void put(std::string& out, T v) {
  put(out, &v, sizeof(T));
}
void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_scalar(std::string& out, ValueType t, int64_t i, double f) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean:
      return put<uint8_t>(out, uint8_t(i));
    case ValueType::u16:
    case ValueType::i16:
      return put<uint16_t>(out, uint16_t(i));
    case ValueType::u32:
    case ValueType::i32:
      return put<uint32_t>(out, uint32_t(i));
    case ValueType::u64:
    case ValueType::i64:
      return put<uint64_t>(out, uint64_t(i));
    case ValueType::f32:
      return put<float>(out, float(f));
    case ValueType::f64:
      return put<double>(out, f);
    default:
      break;
  }
}

void put_value(std::string& out, const Value& v) {
  put<uint32_t>(out, uint32_t(v.type));
  if (v.type == ValueType::string) return put_string(out, v.s);
  if (v.type != ValueType::array) return put_scalar(out, v.type, v.i, v.f);
  put<uint32_t>(out, uint32_t(v.elem));
  put<uint64_t>(out, v.array_size());
  if (v.elem == ValueType::string)
    for (const auto& s : v.strings) put_string(out, s);
  else if (v.elem == ValueType::f32 || v.elem == ValueType::f64)
    for (double f : v.floats) put_scalar(out, v.elem, 0, f);
  else
    for (int64_t i : v.ints) put_scalar(out, v.elem, i, 0);
}

}  // namespace

Value Value::scalar(ValueType t, int64_t v) {
  Value out;
  out.type = t;
  out.i = v;
  return out;
}
Value Value::f32(double v) {
  Value out;
  out.type = ValueType::f32;
  out.f = v;
  return out;
}
Value Value::str(std::string v) {
  Value out;
  out.type = ValueType::string;
  out.s = std::move(v);
  return out;
}
Value Value::string_array(std::vector<std::string> v) {
  Value out;
  out.type = ValueType::array;
  out.elem = ValueType::string;
  out.strings = std::move(v);
  return out;
}
Value Value::f32_array(std::vector<double> v) {
  Value out;
  out.type = ValueType::array;
  out.elem = ValueType::f32;
  out.floats = std::move(v);
  return out;
}
Value Value::i32_array(std::vector<int64_t> v) {
  Value out;
  out.type = ValueType::array;
  out.elem = ValueType::i32;
  out.ints = std::move(v);
  return out;
}
void write_file(const std::string& path, const std::vector<std::pair<std::string, Value>>& kv,
                const std::vector<OutTensor>& tensors, uint64_t alignment) {
  std::string header;
  put<uint32_t>(header, kMagic);
  put<uint32_t>(header, 3);
  put<uint64_t>(header, tensors.size());
  bool has_alignment = false;
  for (const auto& [k, v] : kv) has_alignment |= k == "general.alignment";
  const bool add_alignment = alignment != 32 && !has_alignment;
  put<uint64_t>(header, kv.size() + (add_alignment ? 1 : 0));
  for (const auto& [k, v] : kv) {
    put_string(header, k);
    put_value(header, v);
  }
  if (add_alignment) {
    put_string(header, "general.alignment");
    put_value(header, Value::u32(uint32_t(alignment)));
  }
  std::vector<Tensor> data;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    Tensor c = t.data.contiguous();
    const uint64_t expected = tensor_nbytes(t.type, t.ne, t.name, path);
    ZENITH_CHECK(c.nbytes() == expected, "[gguf] ", path, ": tensor ", t.name, " has ", c.nbytes(),
                 " bytes, its type ", tensor_type_name(uint32_t(t.type)), " and dims need ",
                 expected);
    put_string(header, t.name);
    put<uint32_t>(header, uint32_t(t.ne.size()));
    for (int64_t n : t.ne) put<uint64_t>(header, uint64_t(n));
    put<uint32_t>(header, uint32_t(t.type));
    put<uint64_t>(header, offset);
    offset = align_up(offset + expected, alignment);
    data.push_back(std::move(c));
  }
  header.resize(align_up(header.size(), alignment), '\0');
  core::AtomicFile out(path);
  out.write(header);
  const std::string zeros(alignment, '\0');
  for (const Tensor& c : data) {
    out.write(c.raw_data(), c.nbytes());
    const uint64_t pad = align_up(c.nbytes(), alignment) - c.nbytes();
    out.write(zeros.data(), pad);
  }
  out.commit();
}

}  // namespace zenith::io::gguf
