// The oneDNN backend's engine, stream, primitive cache, layout tensors and the to_plain kernel.
#include "backend/cpu/onednn.h"

#include <omp.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "core/dispatch.h"

namespace zenith::cpu {
namespace onednn {
namespace {

struct State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

State& state() {
  static State s;
  return s;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<void>> entries;
};

// One cache per thread: a primitive runs only on the thread that created it. oneDNN's library
// scratchpad belongs to the creating thread (it is freed when that thread exits), so a Winograd
// convolution made on one thread and run on another crashed (ResNet-18 served from a worker
// thread after a warm-up on the main thread).
Cache& cache() {
  thread_local Cache c;
  return c;
}

std::atomic<int64_t> g_hits{0}, g_misses{0}, g_reorders{0}, g_reorder_ns{0};
std::atomic<bool> g_keep_layout{true};

memory::format_tag plain_tag(size_t ndims) {
  switch (ndims) {
    case 1:
      return memory::format_tag::a;
    case 2:
      return memory::format_tag::ab;
    case 3:
      return memory::format_tag::abc;
    case 4:
      return memory::format_tag::abcd;
    case 5:
      return memory::format_tag::abcde;
    case 6:
      return memory::format_tag::abcdef;
  }
  ZENITH_FAIL("[onednn] unsupported rank ", ndims);
}

const memory::desc& layout_desc(const Tensor& t) {
  auto* l = dynamic_cast<const DnnlLayout*>(t.impl().layout.get());
  ZENITH_CHECK(l != nullptr, "[onednn] tensor has a foreign layout ", t.impl().layout->describe());
  return l->desc;
}

void* data_ptr(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) + t.offset() * int64_t(itemsize(t.dtype()));
}

struct ReorderEntry {
  Primitive prim;
};

}  // namespace

dnnl::engine& engine() { return state().engine; }
dnnl::stream& stream() { return state().stream; }

std::string DnnlLayout::describe() const {
  std::ostringstream os;
  os << "onednn[";
  const auto& b = desc.data.format_desc.blocking;
  for (int i = 0; i < desc.data.ndims; ++i) os << (i ? "," : "") << b.strides[i];
  os << "|";
  for (int i = 0; i < b.inner_nblks; ++i) os << char('a' + b.inner_idxs[i]) << b.inner_blks[i];
  os << "]";
  return os.str();
}

memory::data_type data_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return memory::data_type::f32;
    case DType::bf16:
      return memory::data_type::bf16;
    case DType::f16:
      return memory::data_type::f16;
    case DType::i32:
      return memory::data_type::s32;
    case DType::u8:
      return memory::data_type::u8;
    default:
      ZENITH_FAIL("[onednn] no oneDNN type for ", dtype_name(dtype));
  }
}

Dims dims_of(const Shape& shape) { return Dims(shape.begin(), shape.end()); }

memory::desc plain_desc(const Shape& shape, DType dtype) {
  return memory::desc(dims_of(shape), data_type(dtype), plain_tag(shape.size()));
}

bool is_plain(const memory::desc& desc) {
  // Dense row-major without inner blocks (cheaper than building the plain desc to compare).
  const auto& m = desc.data;
  if (m.format_kind != dnnl_blocked || m.offset0 != 0) return false;
  const auto& b = m.format_desc.blocking;
  if (b.inner_nblks != 0) return false;
  int64_t stride = 1;
  for (int i = m.ndims - 1; i >= 0; --i) {
    if (m.padded_dims[i] != m.dims[i]) return false;
    if (m.dims[i] != 1 && b.strides[i] != stride) return false;
    stride *= m.dims[i];
  }
  return true;
}

bool keepable(const memory::desc& desc) {
  int64_t n = 1;
  for (auto d : desc.dims()) n *= d;
  return int64_t(desc.get_size()) == n * int64_t(memory::data_type_size(desc.data_type()));
}

memory::desc desc_of(const Tensor& t) {
  if (t.has_layout()) return layout_desc(t);
  ZENITH_CHECK(t.is_contiguous(), "[onednn] expected a contiguous tensor, got strides ",
               shape_str(t.strides()));
  return plain_desc(t.shape(), t.dtype());
}

Tensor empty_in(const Shape& shape, DType dtype, const memory::desc& desc) {
  if (is_plain(desc)) return Tensor::empty(shape, dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(desc.get_size(), kCPU);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = kCPU;
  impl->layout = std::make_shared<DnnlLayout>(desc);
  return Tensor(std::move(impl));
}

void reorder(const Tensor& src, const memory::desc& sd, const Tensor& dst, const memory::desc& dd) {
  auto start = std::chrono::steady_clock::now();
  std::string key = Key("reorder").add(sd).add(dd).str();
  auto entry = cached<ReorderEntry>(key, [&] {
    dnnl::reorder::primitive_desc pd(engine(), sd, engine(), dd);
    return std::make_shared<ReorderEntry>(ReorderEntry{Primitive(dnnl::reorder(pd))});
  });
  entry->prim.run({arg(DNNL_ARG_FROM, src, sd), arg(DNNL_ARG_TO, dst, dd)});
  g_reorders.fetch_add(1, std::memory_order_relaxed);
  g_reorder_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
}

Tensor to_desc(const Tensor& t, const memory::desc& want) {
  Tensor src = t.has_layout() ? t : t.contiguous();
  memory::desc have = desc_of(src);
  if (have == want) return src;
  Tensor out = empty_in(src.shape(), src.dtype(), want);
  reorder(src, have, out, want);
  return out;
}

Tensor finish_output(const Tensor& out) {
  if (!out.has_layout()) return out;
  const memory::desc& d = layout_desc(out);
  if (keep_layout() && keepable(d)) return out;
  return to_desc(out, plain_desc(out.shape(), out.dtype()));
}

Key& Key::add(const memory::desc& d) {
  const auto& m = d.data;
  add(int64_t(m.ndims) | int64_t(m.data_type) << 8 | int64_t(m.format_kind) << 16);
  for (int i = 0; i < m.ndims; ++i) add(m.dims[i]).add(m.padded_dims[i]);
  if (m.format_kind == dnnl_blocked) {
    const auto& b = m.format_desc.blocking;
    for (int i = 0; i < m.ndims; ++i) add(b.strides[i]);
    add(b.inner_nblks);
    for (int i = 0; i < b.inner_nblks; ++i) add(b.inner_blks[i]).add(b.inner_idxs[i]);
  }
  return *this;
}

std::shared_ptr<void> cache_lookup(const std::string& key_in,
                                   const std::function<std::shared_ptr<void>()>& make) {
  // Primitives are tuned for the thread count they are created with.
  std::string key = key_in + "#t" + std::to_string(omp_get_max_threads());
  auto& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.entries.find(key);
    if (it != c.entries.end()) {
      g_hits.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  std::shared_ptr<void> entry = make();  // outside the lock: creation may take milliseconds
  g_misses.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(c.mu);
  return c.entries.emplace(key, std::move(entry)).first->second;
}

size_t cache_size() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().entries.size();
}

void clear_cache() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().entries.clear();
}

Arg arg(int id, const Tensor& t) { return {id, desc_of(t), data_ptr(t)}; }

Arg arg(int id, const Tensor& t, const memory::desc& desc) { return {id, desc, data_ptr(t)}; }

void Primitive::run(const std::vector<Arg>& args) {
  constexpr size_t kMaxArgs = 16;
  ZENITH_CHECK(args.size() <= kMaxArgs, "[onednn] too many primitive arguments");
  std::lock_guard<std::mutex> lock(*mu_);
  std::array<dnnl_exec_arg_t, kMaxArgs> c_args;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    memory* m = nullptr;
    for (auto& [id, mem] : mems_)
      if (id == a.id) m = &mem;
    if (!m) {
      mems_.emplace_back(a.id, memory(a.desc, engine(), a.ptr));
      m = &mems_.back().second;
    } else if (m->get_desc() != a.desc) {
      *m = memory(a.desc, engine(), a.ptr);
    } else {
      m->set_data_handle(a.ptr);
    }
    c_args[i] = {a.id, m->get()};
  }
  dnnl_status_t st =
      dnnl_primitive_execute(prim_.get(), stream().get(), int(args.size()), c_args.data());
  ZENITH_CHECK(st == dnnl_success, "[onednn] primitive execution failed with status ", int(st));
  stream().wait();
}

void Primitive::run_concurrent(const std::vector<Arg>& args) const {
  std::unordered_map<int, memory> map;
  for (const Arg& a : args) map.emplace(a.id, memory(a.desc, engine(), a.ptr));
  thread_local dnnl::stream own(engine());
  prim_.execute(own, map);
  own.wait();
}

}  // namespace onednn

// ---- onednn_layout.h

bool is_layout(const Tensor& t) { return t.defined() && t.has_layout(); }

bool same_layout(const Tensor& a, const Tensor& b) {
  if (!is_layout(a) || !is_layout(b)) return false;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  auto* la = dynamic_cast<const onednn::DnnlLayout*>(a.impl().layout.get());
  auto* lb = dynamic_cast<const onednn::DnnlLayout*>(b.impl().layout.get());
  return la && lb && la->desc == lb->desc;
}

Tensor flat_physical(const Tensor& t) {
  ZENITH_CHECK(is_layout(t), "[flat_physical] expected a layout tensor");
  ZENITH_CHECK(onednn::keepable(onednn::desc_of(t)), "[flat_physical] layout has padding");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = {t.numel()};
  impl->strides = {1};
  impl->offset = t.offset();
  impl->dtype = t.dtype();
  impl->device = t.device();
  return Tensor(std::move(impl));
}

Tensor with_layout_of(const Tensor& flat, const Tensor& like) {
  ZENITH_CHECK(is_layout(like), "[with_layout_of] expected a layout tensor to copy the layout of");
  ZENITH_CHECK(flat.is_contiguous() && flat.numel() == like.numel(),
               "[with_layout_of] expected a contiguous tensor of ", like.numel(),
               " elements, got shape ", shape_str(flat.shape()));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = flat.storage();
  impl->shape = like.shape();
  impl->strides = contiguous_strides(like.shape());
  impl->offset = flat.offset();
  impl->dtype = flat.dtype();
  impl->device = flat.device();
  impl->layout = like.impl().layout;
  return Tensor(std::move(impl));
}

Tensor to_layout_of(const Tensor& t, const Tensor& like) {
  ZENITH_CHECK(is_layout(like) && t.shape() == like.shape() && t.dtype() == like.dtype(),
               "[to_layout_of] expected a ", dtype_name(like.dtype()), " tensor of shape ",
               shape_str(like.shape()), ", got ", dtype_name(t.dtype()), " ", shape_str(t.shape()));
  return onednn::to_desc(t, onednn::desc_of(like));
}

OnednnStats onednn_stats() {
  OnednnStats s;
  s.cache_hits = onednn::g_hits.load();
  s.cache_misses = onednn::g_misses.load();
  s.reorders = onednn::g_reorders.load();
  s.reorder_ms = double(onednn::g_reorder_ns.load()) * 1e-6;
  return s;
}

void reset_onednn_stats() {
  onednn::g_hits = 0;
  onednn::g_misses = 0;
  onednn::g_reorders = 0;
  onednn::g_reorder_ns = 0;
}

void set_keep_layout(bool keep) { onednn::g_keep_layout = keep; }
bool keep_layout() { return onednn::g_keep_layout.load(); }

namespace {
std::string& conv_algorithm_setting() {
  static std::string algo = [] {
    const char* env = std::getenv("ZENITH_CONV_ALGO");
    return std::string(env ? env : "auto");
  }();
  return algo;
}
}  // namespace

void set_conv_algorithm(const std::string& name) {
  ZENITH_CHECK(name == "auto" || name == "direct" || name == "winograd",
               "[conv2d] unknown algorithm '", name, "' (known: auto, direct, winograd)");
  conv_algorithm_setting() = name;
}

const std::string& conv_algorithm() { return conv_algorithm_setting(); }

namespace {
std::string& avx2_fast_paths_setting() {
  static std::string mode = [] {
    const char* env = std::getenv("ZENITH_AVX2_FAST_PATHS");
    return std::string(env ? env : "auto");
  }();
  return mode;
}
}  // namespace

void set_avx2_fast_paths(const std::string& mode) {
  ZENITH_CHECK(mode == "auto" || mode == "on" || mode == "off",
               "[onednn] unknown AVX2 fast-path mode '", mode, "' (known: auto, on, off)");
  avx2_fast_paths_setting() = mode;
}

bool onednn_has_avx512() {
  static const bool avx512 = [] {
    const int isa = int(dnnl_get_effective_cpu_isa());
    return (isa & int(dnnl_cpu_isa_avx512_core)) == int(dnnl_cpu_isa_avx512_core);
  }();
  return avx512;
}

bool use_avx2_fast_paths() {
  const std::string& mode = avx2_fast_paths_setting();
  if (mode != "auto") return mode == "on";
  return !onednn_has_avx512();
}

namespace {

// to_plain(x): a layout tensor reordered to a plain contiguous tensor of the same shape.
std::vector<Tensor> to_plain_kernel(const std::vector<Tensor>& in, const NoAttrs&) {
  const Tensor& x = in[0];
  if (!x.has_layout()) return {x.contiguous()};
  return {onednn::to_desc(x, onednn::plain_desc(x.shape(), x.dtype()))};
}

ZENITH_REGISTER_KERNEL(to_plain, CPU, to_plain_kernel);
ZENITH_LAYOUT_AWARE(to_plain);

}  // namespace
}  // namespace zenith::cpu
