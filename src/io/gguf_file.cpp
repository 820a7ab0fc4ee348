// GGUF v3 container: reading (every length and count checked against the file's size) and
// atomic writing. Layout: llama.cpp's docs/gguf.md (ggml/include/gguf.h).
#include "io/gguf_file.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include "zenith/autograd.h"
#include "zenith/error.h"

namespace zenith::io::gguf {
namespace {

constexpr uint64_t kMaxDims = 4;  // GGML_MAX_DIMS

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// Sequential reads of the header; each read checked against the bytes left in the file.
class Reader {
 public:
  Reader(std::FILE* f, uint64_t size, const std::string& path) : f_(f), size_(size), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  void bytes(void* out, uint64_t n, const std::string& what) {
    ZENITH_CHECK(n <= left(), "[gguf] ", path_, ": ", what, " needs ", n, " bytes at offset ", pos_,
                 " but the file ends after ", left(), " more (truncated file?)");
    ZENITH_CHECK(n == 0 || std::fread(out, 1, n, f_) == n, "[gguf] ", path_, ": read error at ",
                 pos_);
    pos_ += n;
  }
  template <typename T>
  T get(const std::string& what) {
    T v;
    bytes(&v, sizeof(T), what);
    return v;
  }
  std::string string(const std::string& what) {
    auto n = get<uint64_t>(what + " (its length)");
    ZENITH_CHECK(n <= left(), "[gguf] ", path_, ": ", what, " says it is ", n,
                 " bytes long but the file has ", left(), " bytes left");
    std::string s(n, '\0');
    bytes(s.data(), n, what);
    return s;
  }

 private:
  std::FILE* f_;
  uint64_t size_, pos_ = 0;
  const std::string& path_;
};

uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean:
      return 1;
    case ValueType::u16:
    case ValueType::i16:
      return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32:
      return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
    case ValueType::string:  // at least its length
      return 8;
    case ValueType::array:
      return 12;
  }
  return 0;
}

bool known_value_type(uint32_t t) { return t <= uint32_t(ValueType::f64); }

// A scalar of type `t` (not string or array) read into v.i or v.f.
void read_scalar(Reader& r, ValueType t, Value& v, const std::string& what) {
  switch (t) {
    case ValueType::u8:
      v.i = r.get<uint8_t>(what);
      break;
    case ValueType::i8:
      v.i = r.get<int8_t>(what);
      break;
    case ValueType::boolean:
      v.i = r.get<uint8_t>(what) != 0;
      break;
    case ValueType::u16:
      v.i = r.get<uint16_t>(what);
      break;
    case ValueType::i16:
      v.i = r.get<int16_t>(what);
      break;
    case ValueType::u32:
      v.i = r.get<uint32_t>(what);
      break;
    case ValueType::i32:
      v.i = r.get<int32_t>(what);
      break;
    case ValueType::u64:
      v.i = int64_t(r.get<uint64_t>(what));
      break;
    case ValueType::i64:
      v.i = r.get<int64_t>(what);
      break;
    case ValueType::f32:
      v.f = r.get<float>(what);
      break;
    case ValueType::f64:
      v.f = r.get<double>(what);
      break;
    default:
      break;
  }
}

Value read_value(Reader& r, ValueType t, const std::string& path, const std::string& key) {
  Value v;
  v.type = t;
  const std::string what = "the value of " + key;
  if (t == ValueType::string) {
    v.s = r.string(what);
  } else if (t == ValueType::array) {
    auto elem = r.get<uint32_t>(what + " (its element type)");
    ZENITH_CHECK(known_value_type(elem) && elem != uint32_t(ValueType::array), "[gguf] ", path,
                 ": key ", key, " is an array of unknown value type ", elem,
                 " (known: 0..12, nested arrays not supported)");
    v.elem = ValueType(elem);
    auto n = r.get<uint64_t>(what + " (its length)");
    ZENITH_CHECK(n <= r.left() / scalar_size(v.elem), "[gguf] ", path, ": key ", key,
                 " says it holds ", n, " ", value_type_name(v.elem),
                 " values but the file has only ", r.left(), " bytes left");
    for (uint64_t j = 0; j < n; ++j) {
      if (v.elem == ValueType::string) {
        v.strings.push_back(r.string(what + "[" + std::to_string(j) + "]"));
      } else {
        Value e;
        read_scalar(r, v.elem, e, what);
        if (e.type = v.elem; e.is_float())
          v.floats.push_back(e.f);
        else
          v.ints.push_back(e.i);
      }
    }
  } else {
    read_scalar(r, t, v, what);
  }
  return v;
}

}  // namespace

uint64_t tensor_nbytes(TensorType type, const std::vector<int64_t>& ne, const std::string& name,
                       const std::string& path) {
  const int64_t block = type_block_elems(type);
  ZENITH_CHECK(!ne.empty() && ne[0] % block == 0, "[gguf] ", path, ": tensor ", name, " of type ",
               tensor_type_name(uint32_t(type)), " has rows of ", ne.empty() ? 0 : ne[0],
               " elements, not a multiple of its block of ", block);
  uint64_t n = uint64_t(ne[0] / block) * uint64_t(type_block_bytes(type));
  for (size_t d = 1; d < ne.size(); ++d) n *= uint64_t(ne[d]);
  return n;
}

const char* value_type_name(ValueType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? names[uint32_t(t)] : "unknown";
}

std::string tensor_type_name(uint32_t type) {
  switch (TensorType(type)) {
    case TensorType::f32:
      return "f32";
    case TensorType::f16:
      return "f16";
    case TensorType::bf16:
      return "bf16";
    case TensorType::q8_0:
      return "q8_0";
    case TensorType::q4_0:
      return "q4_0";
    case TensorType::q4_k:
      return "q4_K";
  }
  return "type " + std::to_string(type);
}

bool is_known_tensor_type(uint32_t type) { return tensor_type_name(type).rfind("type ", 0) != 0; }

int64_t type_block_elems(TensorType t) {
  switch (t) {
    case TensorType::q8_0:
    case TensorType::q4_0:
      return 32;
    case TensorType::q4_k:
      return 256;
    default:
      return 1;
  }
}

int64_t type_block_bytes(TensorType t) {
  switch (t) {
    case TensorType::f32:
      return 4;
    case TensorType::f16:
    case TensorType::bf16:
      return 2;
    case TensorType::q8_0:
      return 34;
    case TensorType::q4_0:
      return 18;
    case TensorType::q4_k:
      return 144;
  }
  return 0;
}

bool Value::is_integer() const {
  return type != ValueType::f32 && type != ValueType::f64 && type != ValueType::string &&
         type != ValueType::array && type != ValueType::boolean;
}
uint64_t Value::array_size() const {
  return elem == ValueType::string                            ? strings.size()
         : (elem == ValueType::f32 || elem == ValueType::f64) ? floats.size()
                                                              : ints.size();
}

Shape TensorEntry::shape() const { return Shape(ne.rbegin(), ne.rend()); }

const Value* File::find(const std::string& key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const TensorEntry* File::find_tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string File::get_string(const std::string& key) const {
  const Value* v = find(key);
  ZENITH_CHECK(v, "[gguf] ", path, ": metadata key ", key, " is missing");
  ZENITH_CHECK(v->type == ValueType::string, "[gguf] ", path, ": metadata key ", key,
               " is of type ", value_type_name(v->type), ", expected a string");
  return v->s;
}
std::string File::get_string(const std::string& key, const std::string& fallback) const {
  return find(key) ? get_string(key) : fallback;
}
int64_t File::get_int(const std::string& key) const {
  const Value* v = find(key);
  ZENITH_CHECK(v, "[gguf] ", path, ": metadata key ", key, " is missing");
  ZENITH_CHECK(v->is_integer(), "[gguf] ", path, ": metadata key ", key, " is of type ",
               value_type_name(v->type), ", expected an integer");
  return v->i;
}
int64_t File::get_int(const std::string& key, int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}
double File::get_float(const std::string& key, double fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  ZENITH_CHECK(v->is_float() || v->is_integer(), "[gguf] ", path, ": metadata key ", key,
               " is of type ", value_type_name(v->type), ", expected a number");
  return v->is_float() ? v->f : double(v->i);
}
bool File::get_bool(const std::string& key, bool fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  ZENITH_CHECK(v->type == ValueType::boolean, "[gguf] ", path, ": metadata key ", key,
               " is of type ", value_type_name(v->type), ", expected a bool");
  return v->i != 0;
}

File read_file(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  ZENITH_CHECK(f, "[gguf] cannot open ", path, ": ", std::strerror(errno));
  std::fseek(f.get(), 0, SEEK_END);
  const long end = std::ftell(f.get());
  std::fseek(f.get(), 0, SEEK_SET);
  ZENITH_CHECK(end >= 0, "[gguf] ", path, ": cannot tell its size");
  const uint64_t size = uint64_t(end);
  Reader r(f.get(), size, path);
  File file;
  file.path = path;
  ZENITH_CHECK(size >= 4 && r.get<uint32_t>("the magic") == kMagic, "[gguf] ", path,
               " is not a GGUF file (it does not start with \"GGUF\")");
  file.version = r.get<uint32_t>("the version");
  ZENITH_CHECK(file.version == 2 || file.version == 3, "[gguf] ", path, ": GGUF version ",
               file.version, " is not supported (expected 3, or 2)");
  const auto n_tensors = r.get<uint64_t>("the tensor count");
  const auto n_kv = r.get<uint64_t>("the metadata key count");
  // Each key/value takes at least 8 + 4 + 1 bytes, each tensor info 8 + 4 + 4 + 8 + 8.
  ZENITH_CHECK(n_kv <= r.left() / 13 && n_tensors <= r.left() / 32, "[gguf] ", path, ": the header",
               " counts ", n_kv, " keys and ", n_tensors, " tensors, more than its ", size,
               " bytes can hold");
  std::set<std::string> keys;
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = r.string("metadata key " + std::to_string(k));
    ZENITH_CHECK(keys.insert(key).second, "[gguf] ", path, ": metadata key ", key,
                 " appears twice");
    auto type = r.get<uint32_t>("the type of " + key);
    ZENITH_CHECK(known_value_type(type), "[gguf] ", path, ": metadata key ", key,
                 " has unknown value type ", type, " (known: 0..12)");
    file.metadata.emplace_back(key, read_value(r, ValueType(type), path, key));
  }
  if (const Value* a = file.find("general.alignment")) {
    ZENITH_CHECK(a->is_integer() && a->i > 0 && a->i <= (1 << 20) && (a->i & (a->i - 1)) == 0,
                 "[gguf] ", path, ": general.alignment must be a power of two integer, got ",
                 a->is_integer() ? std::to_string(a->i) : value_type_name(a->type));
    file.alignment = uint64_t(a->i);
  }
  std::set<std::string> names;
  for (uint64_t t = 0; t < n_tensors; ++t) {
    TensorEntry e;
    e.name = r.string("the name of tensor " + std::to_string(t));
    ZENITH_CHECK(names.insert(e.name).second, "[gguf] ", path, ": tensor ", e.name,
                 " appears twice");
    auto n_dims = r.get<uint32_t>("the dims of " + e.name);
    ZENITH_CHECK(n_dims >= 1 && n_dims <= kMaxDims, "[gguf] ", path, ": tensor ", e.name, " has ",
                 n_dims, " dims, expected 1 to ", kMaxDims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      auto n = r.get<int64_t>("a dim of " + e.name);
      ZENITH_CHECK(n > 0 && uint64_t(n) <= (uint64_t(1) << 40) / numel, "[gguf] ", path,
                   ": tensor ", e.name, " has dim ", d, " of ", n,
                   " (expected positive, and a total under 2^40 elements)");
      numel *= uint64_t(n);
      e.ne.push_back(n);
    }
    e.type = r.get<uint32_t>("the type of " + e.name);
    e.offset = r.get<uint64_t>("the offset of " + e.name);
    if (is_known_tensor_type(e.type))
      e.nbytes = tensor_nbytes(TensorType(e.type), e.ne, e.name, path);
    file.tensors.push_back(std::move(e));
  }
  file.data_offset = align_up(r.pos(), file.alignment);
  for (const auto& e : file.tensors) {
    ZENITH_CHECK(e.offset % file.alignment == 0, "[gguf] ", path, ": tensor ", e.name,
                 " starts at data offset ", e.offset, ", not a multiple of the alignment ",
                 file.alignment);
    ZENITH_CHECK(file.data_offset <= size && e.offset <= size - file.data_offset &&
                     e.nbytes <= size - file.data_offset - e.offset,
                 "[gguf] ", path, ": tensor ", e.name, " (", e.nbytes, " bytes at data offset ",
                 e.offset, ") lies past the end of the file (", size, " bytes; truncated?)");
  }
  return file;
}

std::string read_tensor_bytes(const File& file, const TensorEntry& tensor) {
  ZENITH_CHECK(is_known_tensor_type(tensor.type), "[gguf] ", file.path, ": tensor ", tensor.name,
               " is of ggml type ", tensor.type,
               ", which zenith does not read (supported: f32, f16, bf16, q8_0, q4_0, q4_K)");
  FilePtr f(std::fopen(file.path.c_str(), "rb"));
  ZENITH_CHECK(f, "[gguf] cannot open ", file.path, ": ", std::strerror(errno));
  std::string bytes(tensor.nbytes, '\0');
  ZENITH_CHECK(std::fseek(f.get(), long(file.data_offset + tensor.offset), SEEK_SET) == 0 &&
                   std::fread(bytes.data(), 1, bytes.size(), f.get()) == bytes.size(),
               "[gguf] ", file.path, ": cannot read the data of tensor ", tensor.name,
               " (file changed or truncated?)");
  return bytes;
}

Tensor read_tensor(const File& file, const TensorEntry& tensor) {
  DType dtype;
  switch (TensorType(tensor.type)) {
    case TensorType::f32:
      dtype = DType::f32;
      break;
    case TensorType::f16:
      dtype = DType::f16;
      break;
    case TensorType::bf16:
      dtype = DType::bf16;
      break;
    default:
      ZENITH_FAIL("[gguf] ", file.path, ": tensor ", tensor.name, " is ",
                  tensor_type_name(tensor.type), ", not a float type (f32, f16, bf16)");
  }
  const std::string bytes = read_tensor_bytes(file, tensor);
  Tensor out = Tensor::empty(tensor.shape(), dtype);
  ZENITH_CHECK(out.nbytes() == bytes.size(), "[gguf] ", file.path, ": tensor ", tensor.name,
               " has ", bytes.size(), " bytes, expected ", out.nbytes());
  std::memcpy(out.raw_data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace zenith::io::gguf
