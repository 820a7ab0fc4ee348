// GGUF v3, the file format of llama.cpp/ggml (docs/gguf.md): a header ("GGUF", version 3, tensor
// count, key count), typed metadata key/values (arrays included), tensor infos (name, dims
// innermost first, ggml type, offset into the data section), then the tensors' data, each at a
// multiple of general.alignment (32 unless the file says otherwise). Everything little-endian.
// This layer knows the container only; what the keys mean for a LLaMA model is in
// src/models/llama_gguf.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::io::gguf {

enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
const char* value_type_name(ValueType t);

// ggml's tensor types that zenith reads or writes (ggml.h's enum ggml_type values).
enum class TensorType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q8_0 = 8,
  q4_k = 12,
  bf16 = 30,
};
// "f32", "q4_K", ...; "type N" for one zenith does not know.
std::string tensor_type_name(uint32_t type);
bool is_known_tensor_type(uint32_t type);
inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
// Elements per block and bytes per block (1 and the item size for f32/f16/bf16).
int64_t type_block_elems(TensorType t);
int64_t type_block_bytes(TensorType t);
// Bytes of a tensor of `type` with dims `ne`; fails naming the tensor (and `path`) when a row is
// not whole blocks.
uint64_t tensor_nbytes(TensorType type, const std::vector<int64_t>& ne, const std::string& name,
                       const std::string& path);

// One metadata value. Integers (and bools) live in `i` (u64 as its bits), floats in `f`, a
// string in `s`; an array has `elem` and one of ints / floats / strings.
struct Value {
  ValueType type = ValueType::u32;
  ValueType elem = ValueType::u32;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;

  static Value u32(uint32_t v) { return scalar(ValueType::u32, int64_t(v)); }
  static Value i32(int32_t v) { return scalar(ValueType::i32, v); }
  static Value u64(uint64_t v) { return scalar(ValueType::u64, int64_t(v)); }
  static Value boolean(bool v) { return scalar(ValueType::boolean, v ? 1 : 0); }
  static Value f32(double v);
  static Value str(std::string v);
  static Value string_array(std::vector<std::string> v);
  static Value f32_array(std::vector<double> v);
  static Value i32_array(std::vector<int64_t> v);
  static Value scalar(ValueType t, int64_t v);
  bool is_integer() const;
  bool is_float() const { return type == ValueType::f32 || type == ValueType::f64; }
  uint64_t array_size() const;
};

// A tensor as the file lists it. `ne` is ggml's order (innermost first): a row-major [out, in]
// matrix has ne = {in, out}. `offset` is relative to the data section.
struct TensorEntry {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  Shape shape() const;  // row-major: ne reversed
};

struct File {
  std::string path;
  uint32_t version = 3;
  std::vector<std::pair<std::string, Value>> metadata;  // in file order
  std::vector<TensorEntry> tensors;                     // in file order
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // absolute offset of the data section

  const Value* find(const std::string& key) const;
  const TensorEntry* find_tensor(const std::string& name) const;
  // Typed getters: fail naming the file, the key and the type found when it is missing (the
  // ones without a default) or of another type.
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
};

// Reads the header, metadata and tensor infos of a GGUF file (not the data). A hostile file
// fails with the path and what is wrong: bad magic, a version other than 2 or 3, a length or
// count past the end of the file, an unknown value type, a tensor with 0 or more than 4 dims,
// negative or overflowing sizes, an offset off the alignment, data past the end of the file,
// two tensors or keys of one name. A tensor of a type zenith does not know is listed (its
// nbytes 0); reading its data fails naming it.
File read_file(const std::string& path);
// One tensor's raw bytes.
std::string read_tensor_bytes(const File& file, const TensorEntry& tensor);
// A float tensor (f32, f16, bf16) in its own dtype, shape row-major.
Tensor read_tensor(const File& file, const TensorEntry& tensor);

// A tensor to write: the bytes of `data` (contiguous; f32, f16, bf16 as themselves, u8 as
// blocks of a quantized `type`), listed with `ne`.
struct OutTensor {
  std::string name;
  std::vector<int64_t> ne;
  TensorType type = TensorType::f32;
  Tensor data;
};
// Writes a GGUF v3 file atomically: metadata in the given order (general.alignment is written
// when not 32), tensors in the given order, each aligned. Checks each tensor's byte count
// against its type and ne.
void write_file(const std::string& path, const std::vector<std::pair<std::string, Value>>& kv,
                const std::vector<OutTensor>& tensors, uint64_t alignment = 32);

}  // namespace zenith::io::gguf
