// The oneDNN backend's shared pieces: one engine and stream, a primitive cache keyed by shapes and
// attributes, tensors wrapped as oneDNN memory, and counted reorders between formats.
// Include only from kernel .cpp files (dnnl.hpp is heavy).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>
#include <string>

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
// `t` as oneDNN memory (no copy). Plain `t` must be contiguous.
memory memory_of(const Tensor& t);
memory memory_of(const Tensor& t, const memory::desc& desc);
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
// src -> dst format conversion, counted in the stats.
void reorder(const memory& src, const memory& dst);

// Primitive cache: a process-wide map from a key (op, shapes, attributes) to an entry holding
// primitive descriptors and primitives, created once by `make`.
std::shared_ptr<void> cache_lookup(const std::string& key,
                                   const std::function<std::shared_ptr<void>()>& make);
template <typename Entry>
std::shared_ptr<Entry> cached(const std::string& key,
                              const std::function<std::shared_ptr<Entry>()>& make) {
  return std::static_pointer_cast<Entry>(cache_lookup(key, [&] { return make(); }));
}
size_t cache_size();
void clear_cache();

// Builds cache keys: Key("conv_fwd").add(dims).add(stride)...
class Key {
 public:
  explicit Key(const char* op) : s_(op) {}
  Key& add(int64_t v) {
    s_ += ',';
    s_ += std::to_string(v);
    return *this;
  }
  Key& add(const std::vector<int64_t>& v) {
    s_ += '[';
    for (auto x : v) add(x);
    s_ += ']';
    return *this;
  }
  Key& add(const memory::desc& d);  // its format, not just dims
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

// Runs `p` on the stream with `args` and waits.
void execute(const dnnl::primitive& p, const std::unordered_map<int, memory>& args);

}  // namespace zenith::cpu::onednn
