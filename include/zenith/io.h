// Files: safetensors (checkpoints, fixtures), model checkpoints, and the TensorBoard event
// writer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::nn {
class Cell;
class Optimizer;
}  // namespace zenith::nn

namespace zenith::io {

using Metadata = std::map<std::string, std::string>;

// safetensors: 8-byte little-endian header size, JSON header, raw little-endian data.
// Written to a temporary file, fsynced, then renamed: never half-written.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const Metadata& metadata = {});
// Errors name the file and what is wrong (bad header, truncated data, offsets out of range).
std::map<std::string, Tensor> load_safetensors(const std::string& path,
                                               Metadata* metadata = nullptr);
// Only the __metadata__ (reads the header, not the data).
Metadata read_safetensors_metadata(const std::string& path);

// Where one tensor's data lies: `nbytes` at absolute byte `offset` of `file`, little-endian,
// row-major, in its storage dtype.
struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::string file;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
};
// The tensors of a safetensors file, sorted by name, from its header alone (no data is read);
// validated as load_safetensors validates them.
std::vector<TensorInfo> list_safetensors(const std::string& path, Metadata* metadata = nullptr);
// Reads each listed tensor straight into a new tensor of its storage dtype: one read per tensor,
// no intermediate buffer.
std::map<std::string, Tensor> read_tensors(const std::vector<TensorInfo>& infos);
Tensor read_tensor(const TensorInfo& info);

// ---- checkpoints: a safetensors file with the cell's parameters and buffers by dotted name,
// the optimizer's state under "optimizer.", and `metadata` (epoch, step, architecture, RNG
// state...) in __metadata__, plus "format": "zenith-checkpoint".
void save_checkpoint(const std::string& path, const nn::Cell& net,
                     const nn::Optimizer* optimizer = nullptr, Metadata metadata = {});
// Loads into `net` (and `optimizer` when given). Checks names and shapes first: on a mismatch
// nothing is modified and the error lists every missing, unexpected and mis-shaped tensor.
Metadata load_checkpoint(const std::string& path, nn::Cell& net,
                         nn::Optimizer* optimizer = nullptr);

// ---- TensorBoard: events.out.tfevents.<time>.<host>.<pid> files of TFRecords (length, masked
// CRC32C of the length, data, masked CRC32C of the data) holding Event protocol buffers.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
uint32_t masked_crc32c(const void* data, size_t size);

class SummaryWriter {
 public:
  // Creates `logdir` if needed and a new event file in it.
  explicit SummaryWriter(const std::string& logdir);
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // A scalar at `step`; wall_time < 0 means now. Flushed at once, so TensorBoard sees it live.
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = -1);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Reading event files back (tests, tools): every record's CRCs are checked.
std::vector<std::string> read_tfrecords(const std::string& path);
struct ScalarEvent {
  std::string tag;
  double value = 0;
  int64_t step = 0;
  double wall_time = 0;
};
// The scalar summaries of an event file, in order; `file_version` receives the first event's.
std::vector<ScalarEvent> read_scalar_events(const std::string& path,
                                            std::string* file_version = nullptr);

}  // namespace zenith::io
