// bfloat16 x bfloat16 GEMM in bfloat16 arithmetic: oneDNN's matmul (brgemm kernels on
// vdpbf16ps where the CPU has AVX512_BF16, float32 accumulation), C float32. The products of two
// bfloat16 values are exact in float32, so this differs from converting both to float32 (what
// gemm_lowp does without it) only in the order of the sums. M is a runtime dim: one primitive per
// (n, k, layout), whatever the batch's rows.
#include <algorithm>

#include "backend/cpu/gemm.h"
#include "backend/cpu/onednn.h"
#include "zenith/cpu_features.h"

namespace zenith::cpu {
namespace {

namespace dn = onednn;
using dnnl::memory;

struct MatmulBf16 {
  bool made = false;  // oneDNN has no matmul for these descriptors: gemm_lowp's float32 path
  dnnl::matmul::primitive_desc pd;
  dn::Primitive prim;
};

// [rows, cols] with row stride ld, stored transposed when `trans` (element (i, j) at i + j ld).
memory::desc matrix_desc(int64_t rows, int64_t cols, int64_t ld, bool trans, memory::data_type t) {
  return memory::desc({rows, cols}, t, trans ? memory::dims{1, ld} : memory::dims{ld, 1});
}

// C [m, n] = op(A) op(B) (+ C when beta is 1, + the float32 row `bias` [n] when given) for
// bfloat16 A and B, C of type `dst` (float32, or bfloat16 rounded by the kernel as it stores: no
// float32 copy, no pass of its own).
bool matmul_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                 const void* b, int64_t ldb, float beta, const float* bias, void* c,
                 memory::data_type dst, int64_t ldc) {
  using dt = memory::data_type;
  constexpr int64_t kRuntime = DNNL_RUNTIME_DIM_VAL;
  // M (and the strides that follow it) known only at run time.
  const memory::desc src_any({kRuntime, k}, dt::bf16,
                             ta ? memory::dims{1, kRuntime} : memory::dims{lda, 1});
  const memory::desc wei = matrix_desc(k, n, ldb, tb, dt::bf16);
  const memory::desc dst_any({kRuntime, n}, dst, memory::dims{ldc, 1});
  const std::string key = dn::Key("matmul_bf16")
                              .add(n)
                              .add(k)
                              .add(int64_t(ta))
                              .add(int64_t(tb))
                              .add(ta ? 0 : lda)
                              .add(ldb)
                              .add(ldc)
                              .add(int64_t(beta != 0.f))
                              .add(int64_t(dst))
                              .add(int64_t(bias != nullptr))
                              .str();
  auto e = dn::cached<MatmulBf16>(key, [&] {
    dnnl::primitive_attr attr;
    if (beta != 0.f) {
      dnnl::post_ops post;
      post.append_sum(1.f);
      attr.set_post_ops(post);
    }
    auto made = std::make_shared<MatmulBf16>();
    try {
      const memory::desc bias_desc({1, n}, dt::f32, memory::dims{n, 1});
      dnnl::matmul::desc d = bias ? dnnl::matmul::desc(src_any, wei, bias_desc, dst_any)
                                  : dnnl::matmul::desc(src_any, wei, dst_any);
      made->pd = dnnl::matmul::primitive_desc(d, attr, dn::engine());
      made->prim = dn::Primitive(dnnl::matmul(made->pd));
      made->made = true;
    } catch (const dnnl::error&) {
    }
    return made;
  });
  if (!e->made) return false;
  std::vector<dn::Arg> args = {
      {DNNL_ARG_SRC, matrix_desc(m, k, lda, ta, dt::bf16), const_cast<void*>(a)},
      {DNNL_ARG_WEIGHTS, wei, const_cast<void*>(b)},
      {DNNL_ARG_DST, memory::desc({m, n}, dst, memory::dims{ldc, 1}), c}};
  if (bias)
    args.push_back({DNNL_ARG_BIAS, memory::desc({1, n}, dt::f32, memory::dims{n, 1}),
                    const_cast<float*>(bias)});
  e->prim.run(args);
  return true;
}

}  // namespace

bool gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
               DType a_dtype, int64_t lda, const void* b, DType b_dtype, int64_t ldb, float beta,
               float* c, int64_t ldc) {
  if (!bf16_arithmetic() || a_dtype != DType::bf16 || b_dtype != DType::bf16 || alpha != 1.f ||
      (beta != 0.f && beta != 1.f) || m == 0 || n == 0 || k == 0)
    return false;
  return matmul_bf16(ta, tb, m, n, k, a, lda, b, ldb, beta, nullptr, c, memory::data_type::f32,
                     ldc);
}

bool gemm_bf16_biased(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                      const void* b, int64_t ldb, const float* bias, float* c, int64_t ldc) {
  if (!bf16_arithmetic() || m == 0 || n == 0 || k == 0) return false;
  if (!ta) lda = std::max(lda, k);
  if (tb) ldb = std::max(ldb, k);
  return matmul_bf16(ta, tb, m, n, k, a, lda, b, ldb, 0.f, bias, c, memory::data_type::f32, ldc);
}

bool gemm_bf16_rounded(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a,
                       int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc) {
  if (!bf16_arithmetic() || m == 0 || n == 0 || k == 0) return false;
  if (!ta) lda = std::max(lda, k);
  if (tb) ldb = std::max(ldb, k);
  return matmul_bf16(ta, tb, m, n, k, a, lda, b, ldb, 0.f, nullptr, c, memory::data_type::bf16,
                     ldc);
}

}  // namespace zenith::cpu
