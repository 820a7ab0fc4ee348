// Graph mode's fused elementwise loop: a program of elementwise ops (FusedElementwiseAttrs) over
// operands of one shape (or 0-d scalars), run chunk by chunk so that the intermediates of a chain
// stay in L1 instead of making a round trip through memory per op. Each instruction applies the
// op's own functor (elementwise_functors.h), so the result equals the ops run one by one; a
// trailing sum (sum_last) reduces the last output in fixed chunk order (deterministic).
#include "backend/cpu/elementwise_functors.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

constexpr int64_t kChunk = 512;  // elements per register: 16 registers of float fit in 32 KB

template <typename F, typename T>
void unary_chunk(T* __restrict dst, const T* __restrict a, int64_t n) {
  F f;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = f(a[i]);
}

template <typename F, typename T>
void binary_chunk(T* __restrict dst, const T* __restrict a, const T* __restrict b, int64_t n) {
  F f;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

// dst = op(a, b) over n elements; imm is pow_scalar's exponent (as bits).
template <typename T>
void apply(OpId op, T* dst, const T* a, const T* b, int64_t imm, int64_t n) {
  switch (op) {
    case OpId::neg:
      return unary_chunk<Neg>(dst, a, n);
    case OpId::abs:
      return unary_chunk<Abs>(dst, a, n);
    case OpId::square:
      return unary_chunk<Square>(dst, a, n);
    case OpId::relu:
      return unary_chunk<Relu>(dst, a, n);
    case OpId::exp:
      return unary_chunk<Exp>(dst, a, n);
    case OpId::log:
      return unary_chunk<Log>(dst, a, n);
    case OpId::sqrt:
      return unary_chunk<Sqrt>(dst, a, n);
    case OpId::rsqrt:
      return unary_chunk<Rsqrt>(dst, a, n);
    case OpId::tanh:
      return unary_chunk<Tanh>(dst, a, n);
    case OpId::sigmoid:
      return unary_chunk<Sigmoid>(dst, a, n);
    case OpId::silu:
      return unary_chunk<Silu>(dst, a, n);
    case OpId::gelu:
      return unary_chunk<Gelu>(dst, a, n);
    case OpId::gelu_tanh:
      return unary_chunk<GeluTanh>(dst, a, n);
    case OpId::erf:
      return unary_chunk<Erf>(dst, a, n);
    case OpId::pow_scalar: {
      const double e = __builtin_bit_cast(double, imm);
      for (int64_t i = 0; i < n; ++i) dst[i] = pow_scalar(a[i], e);
      return;
    }
    case OpId::add:
      return binary_chunk<Add>(dst, a, b, n);
    case OpId::sub:
      return binary_chunk<Sub>(dst, a, b, n);
    case OpId::mul:
      return binary_chunk<Mul>(dst, a, b, n);
    case OpId::div:
      return binary_chunk<Div>(dst, a, b, n);
    case OpId::maximum:
      return binary_chunk<Maximum>(dst, a, b, n);
    case OpId::minimum:
      return binary_chunk<Minimum>(dst, a, b, n);
    case OpId::relu_backward:
      return binary_chunk<ReluBackward>(dst, a, b, n);
    default:
      ZENITH_FAIL("[fused_elementwise] ", op_name(op), " is not an elementwise op of the loop");
  }
}

struct Instruction {
  OpId op;
  int64_t dst, a, b, imm;
};

std::vector<Instruction> decode(const FusedElementwiseAttrs& attrs) {
  ZENITH_CHECK(attrs.code.size() % 5 == 0, "[fused_elementwise] program of ", attrs.code.size(),
               " numbers is not whole instructions");
  std::vector<Instruction> prog;
  for (size_t i = 0; i < attrs.code.size(); i += 5) {
    const int64_t* c = attrs.code.data() + i;
    ZENITH_CHECK(
        c[1] == attrs.num_inputs + int64_t(prog.size()) && c[2] >= 0 && c[2] < c[1] && c[3] < c[1],
        "[fused_elementwise] malformed instruction ", i / 5);
    prog.push_back({OpId(c[0]), c[1], c[2], c[3], c[4]});
  }
  return prog;
}

// How the loop reads an input: all of it (n elements), one value, or a trailing-dims broadcast
// (m elements repeated: element i reads p[i % m], e.g. a [T, T] mask over [B, H, T, T]).
template <typename T>
struct Source {
  const T* p = nullptr;
  int64_t m = 0;  // n: full, 1: scalar, else the period
};

// The program over flat operands. outs[j] receives output j (the sum when sum_last and j is
// the last output).
template <typename T>
void run_program(const FusedElementwiseAttrs& attrs, const std::vector<Instruction>& prog,
                 const std::vector<Source<T>>& src, const std::vector<T*>& outs, int64_t n) {
  const int64_t ni = attrs.num_inputs, regs = ni + int64_t(prog.size());
  const int64_t nout = int64_t(attrs.outputs.size());
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  // Register r is written to output out_of[r] directly (-1: a temporary).
  std::vector<int64_t> out_of(size_t(regs), -1);
  for (int64_t j = 0; j < nout; ++j)
    if (!(attrs.sum_last && j == nout - 1)) out_of[size_t(attrs.outputs[size_t(j)])] = j;
  const int64_t summed = attrs.sum_last ? attrs.outputs.back() : -1;
  std::vector<double> partial(size_t(attrs.sum_last ? chunks : 0));
  parallel_for(chunks, std::max<int64_t>(1, kGrain / kChunk), [&](int64_t begin, int64_t end) {
    std::vector<T> buf(static_cast<size_t>(regs * kChunk));
    std::vector<T*> ptr(static_cast<size_t>(regs));
    for (int64_t k = 0; k < ni; ++k)
      if (src[size_t(k)].m == 1) std::fill_n(&buf[size_t(k * kChunk)], kChunk, src[size_t(k)].p[0]);
    for (int64_t c = begin; c < end; ++c) {
      const int64_t start = c * kChunk, len = std::min(kChunk, n - start);
      for (int64_t r = 0; r < regs; ++r) {
        T* reg = &buf[size_t(r * kChunk)];
        if (r < ni && src[size_t(r)].m == n) {
          reg = const_cast<T*>(src[size_t(r)].p) + start;
        } else if (r < ni && src[size_t(r)].m > 1) {
          const Source<T>& s = src[size_t(r)];
          for (int64_t i = 0, j = start % s.m; i < len; ++i, j = j + 1 == s.m ? 0 : j + 1)
            reg[i] = s.p[j];
        } else if (out_of[size_t(r)] >= 0) {
          reg = outs[size_t(out_of[size_t(r)])] + start;
        }
        ptr[size_t(r)] = reg;
      }
      for (const Instruction& ins : prog)
        apply<T>(ins.op, ptr[size_t(ins.dst)], ptr[size_t(ins.a)],
                 ins.b >= 0 ? ptr[size_t(ins.b)] : nullptr, ins.imm, len);
      if (summed >= 0) {
        const T* s = ptr[size_t(summed)];
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < len; ++i) acc += s[i];
        partial[size_t(c)] = double(acc);
      }
    }
  });
  if (summed >= 0) {
    double total = 0;
    for (double p : partial) total += p;
    *outs.back() = T(total);
  }
}

// True when `t` broadcasts to `shape` by its trailing dims only (leading dims missing or 1).
bool trailing_broadcast(const Tensor& t, const Shape& shape) {
  Shape s = t.shape();
  while (!s.empty() && s.front() == 1) s.erase(s.begin());
  if (s.size() > shape.size()) return false;
  return std::equal(s.begin(), s.end(), shape.end() - int64_t(s.size()));
}

// fused_elementwise(inputs...) -> the program's outputs over attrs.shape. Inputs: of that shape,
// one-element scalars, or trailing-dims broadcasts. Layout operands are handled as the
// elementwise ops handle them (layout_elementwise): when every full input shares one oneDNN
// format (plain ones are reordered into it) the loop runs on the physical elements and the
// outputs keep that format; otherwise everything is plain. A summed output is 0-d.
std::vector<Tensor> fused_elementwise_kernel(const std::vector<Tensor>& in_raw,
                                             const FusedElementwiseAttrs& attrs) {
  const std::vector<Instruction> prog = decode(attrs);
  ZENITH_CHECK(int64_t(in_raw.size()) == attrs.num_inputs, "[fused_elementwise] expected ",
               attrs.num_inputs, " inputs, got ", in_raw.size());
  const int64_t n = shape_numel(attrs.shape);
  std::vector<Tensor> in = in_raw;
  const Tensor* like = nullptr;
  bool periodic = false;
  for (auto& t : in) {
    ZENITH_CHECK(t.defined() && t.dtype() == in[0].dtype(),
                 "[fused_elementwise] inputs must be defined and of one dtype");
    if (t.shape() == attrs.shape) {
      if (!like && is_layout(t)) like = &t;
    } else if (t.numel() != 1) {
      ZENITH_CHECK(trailing_broadcast(t, attrs.shape), "[fused_elementwise] input of shape ",
                   shape_str(t.shape()), " does not broadcast to ", shape_str(attrs.shape),
                   " by trailing dims");
      periodic = true;
    }
  }
  bool flat = like != nullptr && !periodic;
  for (auto& t : in)
    if (flat && t.shape() == attrs.shape && !same_layout(t, *like) && is_layout(t)) flat = false;
  const Tensor layout_like = flat ? *like : Tensor();
  for (auto& t : in) {
    if (t.shape() == attrs.shape && flat)
      t = flat_physical(is_layout(t) ? t : to_layout_of(t, layout_like));
    else
      t = (is_layout(t) ? dispatch::call1<OpId::to_plain>({t}) : t).contiguous();
  }
  const DType dtype = in.empty() ? DType::f32 : in[0].dtype();
  std::vector<Tensor> outputs;
  const size_t nout = attrs.outputs.size();
  for (size_t j = 0; j < nout; ++j) {
    if (attrs.sum_last && j + 1 == nout)
      outputs.push_back(Tensor::empty({}, dtype));
    else
      outputs.push_back(Tensor::empty(flat ? Shape{n} : attrs.shape, dtype));
  }
  visit_float(dtype, "fused_elementwise", [&](auto tag) {
    using T = decltype(tag);
    std::vector<Source<T>> src;
    for (auto& t : in)
      src.push_back({t.template data<T>(), t.numel() == n ? n : t.numel() == 1 ? 1 : t.numel()});
    std::vector<T*> outs;
    for (auto& o : outputs) outs.push_back(o.template data<T>());
    run_program<T>(attrs, prog, src, outs, n);
  });
  if (flat)
    for (size_t j = 0; j < nout; ++j)
      if (!(attrs.sum_last && j + 1 == nout)) outputs[j] = with_layout_of(outputs[j], layout_like);
  return outputs;
}

ZENITH_REGISTER_KERNEL(fused_elementwise, CPU, fused_elementwise_kernel);
ZENITH_LAYOUT_AWARE(fused_elementwise);

}  // namespace
}  // namespace zenith::cpu
