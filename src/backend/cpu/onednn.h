// The oneDNN backend's shared pieces: one engine and stream, a primitive cache keyed by shapes and
// attributes, tensors wrapped as oneDNN memory, and counted reorders between formats.
// Include only from kernel .cpp files (dnnl.hpp is heavy).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "backend/cpu/onednn_layout.h"
#include "zenith/tensor.h"

namespace zenith::cpu::onednn {

using dnnl::memory;
using Dims = memory::dims;

dnnl::engine& engine();
dnnl::stream& stream();

// The oneDNN format of a layout tensor.
struct DnnlLayout final : OpaqueLayout {
  explicit DnnlLayout(memory::desc d) : desc(std::move(d)) {}
  memory::desc desc;
  std::string describe() const override;
};

memory::data_type data_type(DType dtype);
Dims dims_of(const Shape& shape);
// Dense row-major (nchw-like) descriptor of `shape`.
memory::desc plain_desc(const Shape& shape, DType dtype);
// The descriptor `t` is stored in: its layout, or its (dense) plain format. Plain `t` must be
// contiguous.
memory::desc desc_of(const Tensor& t);
// A new tensor of logical `shape` stored in `desc`: plain when `desc` is the dense plain format,
// else a layout tensor. `desc` must have no padding.
Tensor empty_in(const Shape& shape, DType dtype, const memory::desc& desc);
bool is_plain(const memory::desc& desc);
// A blocked format is kept only when it has no padding (so elementwise ops may see it flat).
bool keepable(const memory::desc& desc);

// `t` stored in `want`: t itself when already so, else a reordered copy (counted).
Tensor to_desc(const Tensor& t, const memory::desc& want);
// An output stored in `chosen` (what a primitive picked) returned as users should see it: kept as
// a layout tensor when allowed and keepable, else reordered to plain.
Tensor finish_output(const Tensor& out);
// src (stored as src_desc) -> dst (stored as dst_desc), counted in the stats.
void reorder(const Tensor& src, const memory::desc& src_desc, const Tensor& dst,
             const memory::desc& dst_desc);

// Primitive cache: a per-thread map from a key (op, shapes, attributes) to an entry holding
// primitive descriptors and primitives, created once by `make`.
std::shared_ptr<void> cache_lookup(const std::string& key,
                                   const std::function<std::shared_ptr<void>()>& make);
template <typename Entry>
std::shared_ptr<Entry> cached(const std::string& key,
                              const std::function<std::shared_ptr<Entry>()>& make) {
  return std::static_pointer_cast<Entry>(cache_lookup(key, [&] { return make(); }));
}
size_t cache_size();  // this thread's cache: primitives never cross threads (onednn.cpp)
void clear_cache();

// Builds cache keys as raw bytes: Key("conv_fwd").add(dims).add(stride)...
class Key {
 public:
  explicit Key(const char* op) : s_(op) { s_.reserve(256); }
  Key& add(int64_t v) {
    s_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Key& add(const std::vector<int64_t>& v) {
    add(int64_t(v.size()));
    s_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
    return *this;
  }
  Key& add(const memory::desc& d);  // its format, not just dims
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

// One argument of a primitive execution: which one (DNNL_ARG_*), its format, its data.
struct Arg {
  int id;
  memory::desc desc;
  void* ptr;
};
// `t` (a layout tensor, or a contiguous plain one) as argument `id`, in its own format or `desc`.
Arg arg(int id, const Tensor& t);
Arg arg(int id, const Tensor& t, const memory::desc& desc);

// A primitive and the memory objects of its arguments: made on the first run, re-pointed at the
// new buffers on later ones (creating dnnl::memory objects costs microseconds per call). Runs
// of one Primitive are serialised.
class Primitive {
 public:
  Primitive() = default;
  explicit Primitive(dnnl::primitive p) : prim_(std::move(p)) {}
  // Executes on the stream and waits.
  void run(const std::vector<Arg>& args);
  // Executes on the calling thread's own stream, with memory objects made for this call: for
  // calls of one primitive from several threads of a parallel region at once (each then runs
  // on its thread alone). The primitive needs scratchpad_mode::user and each thread its own
  // DNNL_ARG_SCRATCHPAD: the library's scratchpad is shared.
  void run_concurrent(const std::vector<Arg>& args) const;

 private:
  dnnl::primitive prim_;
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
  std::vector<std::pair<int, memory>> mems_;
};

}  // namespace zenith::cpu::onednn
