// safetensors (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// size N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {str: str}}, then the raw little-endian data; offsets are relative to the
// end of the header.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/atomic_file.h"
#include "zenith/autograd.h"
#include "zenith/io.h"

namespace zenith::io {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit
constexpr const char* kMetadataKey = "__metadata__";

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
    case DType::b8:
      return "BOOL";
  }
  return "?";
}

bool st_dtype_from_name(const std::string& s, DType* out) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64,
                  DType::u8, DType::b8}) {
    if (s == st_dtype_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

// A read-only file descriptor that closes itself.
class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ZENITH_CHECK(fd_ >= 0, "[safetensors] ", path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    ZENITH_CHECK(::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode), "[safetensors] ", path,
                 ": not a regular file");
    size_ = uint64_t(st.st_size);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  void read_at(void* dst, uint64_t size, uint64_t offset) const {
    char* p = static_cast<char*>(dst);
    while (size > 0) {
      ssize_t n = ::pread(fd_, p, size, off_t(offset));
      if (n < 0 && errno == EINTR) continue;
      ZENITH_CHECK(n > 0, "[safetensors] ", path_, ": truncated or unreadable at offset ", offset);
      p += n;
      size -= uint64_t(n);
      offset += uint64_t(n);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// One header entry: `begin`/`end` are relative to the end of the header.
TensorInfo parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j,
                       uint64_t data_size, uint64_t data_start) {
  auto bad = [&](const auto&... what) {
    ZENITH_FAIL("[safetensors] ", path, ": tensor '", name, "': ", what...);
  };
  if (!j.is_object()) bad("header entry is not an object");
  if (!j.contains("dtype") || !j["dtype"].is_string()) bad("missing dtype");
  if (!j.contains("shape") || !j["shape"].is_array()) bad("missing shape");
  if (!j.contains("data_offsets") || !j["data_offsets"].is_array() || j["data_offsets"].size() != 2)
    bad("missing data_offsets [begin, end]");
  TensorInfo e;
  e.name = name;
  e.file = path;
  std::string dt = j["dtype"].get<std::string>();
  if (!st_dtype_from_name(dt, &e.dtype))
    bad("unsupported dtype '", dt, "' (supported: F32 F64 F16 BF16 I32 I64 U8 BOOL)");
  uint64_t numel = 1;
  for (const auto& d : j["shape"]) {
    if (!d.is_number_unsigned()) bad("shape has a non-integer or negative dimension");
    uint64_t v = d.get<uint64_t>();
    if (v > (uint64_t(1) << 48) || __builtin_mul_overflow(numel, v, &numel))
      bad("shape is too large");
    e.shape.push_back(int64_t(v));
  }
  for (const auto& o : j["data_offsets"])
    if (!o.is_number_unsigned()) bad("data_offsets are not non-negative integers");
  uint64_t begin = j["data_offsets"][0].get<uint64_t>();
  uint64_t end = j["data_offsets"][1].get<uint64_t>();
  if (begin > end) bad("data_offsets [", begin, ", ", end, "] are reversed");
  if (end > data_size)
    bad("data [", begin, ", ", end, ") ends at file offset ", data_start + end,
        " past the end of the file (", data_start + data_size, " bytes): truncated?");
  uint64_t expected = 0;
  if (__builtin_mul_overflow(numel, uint64_t(itemsize(e.dtype)), &expected))
    bad("shape is too large");
  if (end - begin != expected)
    bad("holds ", end - begin, " bytes at file offset ", data_start + begin, ", but ", dt, " ",
        shape_str(e.shape), " needs ", expected);
  e.offset = data_start + begin;
  e.nbytes = expected;
  return e;
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const Metadata& metadata) {
  NoGradGuard no_grad;
  nlohmann::json header = nlohmann::json::object();
  std::vector<Tensor> plain;
  plain.reserve(tensors.size());
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted by name, a stable layout
    ZENITH_CHECK(name != kMetadataKey && !name.empty(), "[safetensors] ", path,
                 ": invalid tensor name '", name, "'");
    ZENITH_CHECK(t.defined(), "[safetensors] ", path, ": tensor '", name, "' is undefined");
    ZENITH_CHECK(t.device() == kCPU, "[safetensors] ", path, ": tensor '", name, "' is on ",
                 t.device().str(), "; copy it to the CPU first");
    Tensor c = t.detach().contiguous();
    uint64_t n = c.nbytes();
    header[name] = {{"dtype", st_dtype_name(c.dtype())},
                    {"shape", c.shape()},
                    {"data_offsets", {offset, offset + n}}};
    offset += n;
    plain.push_back(std::move(c));
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // aligns the data, as the reference writer does
  uint64_t n = json.size();
  unsigned char size_le[8];
  for (int i = 0; i < 8; ++i) size_le[i] = uint8_t(n >> (8 * i));

  core::AtomicFile out(path);
  out.write(size_le, 8);
  out.write(json);
  for (const auto& t : plain)
    if (t.nbytes() > 0) out.write(t.raw_data(), t.nbytes());
  out.commit();
}

namespace {

// Reads and parses the JSON header; returns it and the offset where the data starts.
nlohmann::json read_header(const InputFile& file, const std::string& path, uint64_t* data_start) {
  ZENITH_CHECK(file.size() >= 8, "[safetensors] ", path, ": file is ", file.size(),
               " bytes, too short for the 8-byte header size at offset 0");
  unsigned char size_le[8];
  file.read_at(size_le, 8, 0);
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= uint64_t(size_le[i]) << (8 * i);
  ZENITH_CHECK(header_size <= kMaxHeaderBytes, "[safetensors] ", path, ": header size ",
               header_size, " at offset 0 exceeds the ", kMaxHeaderBytes, "-byte limit");
  ZENITH_CHECK(header_size <= file.size() - 8, "[safetensors] ", path, ": header size ",
               header_size, " at offset 0 runs past the end of the file (", file.size(),
               " bytes): truncated?");
  std::string text(header_size, '\0');
  file.read_at(text.data(), header_size, 8);
  ZENITH_CHECK(!text.empty() && text[0] == '{', "[safetensors] ", path,
               ": header at offset 8 does not start with '{'");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ZENITH_FAIL("[safetensors] ", path, ": header JSON at offset 8 is invalid: ", e.what());
  }
  ZENITH_CHECK(header.is_object(), "[safetensors] ", path, ": header is not a JSON object");
  *data_start = 8 + header_size;
  return header;
}

Metadata parse_metadata(const nlohmann::json& value, const std::string& path) {
  ZENITH_CHECK(value.is_object(), "[safetensors] ", path, ": __metadata__ is not an object");
  for (const auto& [k, v] : value.items())
    ZENITH_CHECK(v.is_string(), "[safetensors] ", path, ": __metadata__ value '", k,
                 "' is not a string");
  return value.get<Metadata>();
}

}  // namespace

Metadata read_safetensors_metadata(const std::string& path) {
  InputFile file(path);
  uint64_t data_start = 0;
  nlohmann::json header = read_header(file, path, &data_start);
  return header.contains(kMetadataKey) ? parse_metadata(header[kMetadataKey], path) : Metadata{};
}

std::vector<TensorInfo> list_safetensors(const std::string& path, Metadata* metadata) {
  InputFile file(path);
  uint64_t data_start = 0;
  nlohmann::json header = read_header(file, path, &data_start);
  const uint64_t data_size = file.size() - data_start;
  std::vector<TensorInfo> entries;
  for (const auto& [name, value] : header.items()) {  // nlohmann's object: sorted by name
    if (name == kMetadataKey) {
      Metadata m = parse_metadata(value, path);
      if (metadata) *metadata = std::move(m);
      continue;
    }
    entries.push_back(parse_entry(path, name, value, data_size, data_start));
  }
  std::vector<const TensorInfo*> by_offset;
  for (const auto& e : entries)
    if (e.nbytes > 0) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    ZENITH_CHECK(b.offset >= a.offset + a.nbytes, "[safetensors] ", path, ": tensors '", a.name,
                 "' [", a.offset - data_start, ", ", a.offset - data_start + a.nbytes, ") and '",
                 b.name, "' [", b.offset - data_start, ", ", b.offset - data_start + b.nbytes,
                 ") overlap");
  }
  return entries;
}

std::map<std::string, Tensor> read_tensors(const std::vector<TensorInfo>& infos) {
  // File by file, each in offset order: every file is opened once and read front to back.
  std::vector<const TensorInfo*> order;
  for (const auto& info : infos) order.push_back(&info);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->file != b->file ? a->file < b->file : a->offset < b->offset;
  });
  std::map<std::string, Tensor> out;
  std::unique_ptr<InputFile> file;
  for (const TensorInfo* info : order) {
    ZENITH_CHECK(!out.count(info->name), "[safetensors] tensor '", info->name,
                 "' is listed twice (", info->file, ")");
    if (!file || file->path() != info->file) file = std::make_unique<InputFile>(info->file);
    ZENITH_CHECK(info->offset + info->nbytes <= file->size(), "[safetensors] ", info->file,
                 ": tensor '", info->name, "' ends at offset ", info->offset + info->nbytes,
                 " past the end of the file (", file->size(), " bytes): truncated?");
    Tensor t = Tensor::empty(info->shape, info->dtype);
    ZENITH_CHECK(t.nbytes() == info->nbytes, "[safetensors] ", info->file, ": tensor '", info->name,
                 "' has ", info->nbytes, " bytes for ", dtype_name(info->dtype), " ",
                 shape_str(info->shape));
    if (info->nbytes > 0) file->read_at(t.raw_data(), info->nbytes, info->offset);
    out.emplace(info->name, std::move(t));
  }
  return out;
}

Tensor read_tensor(const TensorInfo& info) { return read_tensors({info}).begin()->second; }

std::map<std::string, Tensor> load_safetensors(const std::string& path, Metadata* metadata) {
  return read_tensors(list_safetensors(path, metadata));
}

}  // namespace zenith::io
