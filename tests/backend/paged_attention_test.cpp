// The paged attention kernels (src/backend/cpu/paged_attention*) on every instruction set this
// CPU runs, over float32, bfloat16 and float16 caches, against the float64 reference (of the
// rounded values), and each one's tokens bit-identical alone and batched.
#include "backend/cpu/paged_attention.h"

#include <cstring>

#include "support/op_check.h"
#include "support/paged_case.h"

using namespace zenith;
using namespace zenith::testing;
using cpu::PagedIsa;

namespace {

// Tokens first .. first + count of the case on `isa`, the caches (already in C's dtype) as C.
template <typename C>
Tensor run(PagedIsa isa, const PagedCase& c, int64_t first, int64_t count) {
  const Tensor q = c.q.to(DType::f32).slice(2, first, first + count).contiguous();
  const Tensor &k = c.k, &v = c.v;
  const Tensor seq = c.seq.slice(0, first, first + count).contiguous();
  const Tensor pos = c.pos.slice(0, first, first + count).contiguous();
  Tensor out = Tensor::empty(q.shape());
  cpu::paged_attention_f32<C>(
      isa, {q.data<float>(), k.data<C>(), v.data<C>(), out.data<float>(), c.table.data<int32_t>(),
            seq.data<int32_t>(), pos.data<int32_t>(), q.size(1), k.size(1), count, q.size(3),
            k.size(2), c.table.size(1), float(1 / std::sqrt(double(q.size(3))))});
  return out;
}

template <typename C>
void check_every_isa(DType dtype) {
  PagedCase c = paged_case(8, 2, 72, 16, {3, 50, 200}, {3, 1, 9}, 11);
  c.k = c.k.to(dtype);
  c.v = c.v.to(dtype);
  const Tensor want = paged_reference(c);  // of the rounded values
  const int64_t n = c.q.size(2);
  for (PagedIsa isa : {PagedIsa::scalar, PagedIsa::avx2, PagedIsa::avx512}) {
    if (!cpu::paged_isa_supported(isa)) continue;  // the AVX-512 path on a CPU without it
    const Tensor batched = run<C>(isa, c, 0, n);
    EXPECT_TRUE(all_close(batched, want, 1e-5, 1e-6))
        << cpu::paged_isa_name(isa) << " " << dtype_name(dtype);
    for (int64_t t = 0; t < n; ++t) {
      const Tensor one = run<C>(isa, c, t, 1);
      const Tensor row = batched.slice(2, t, t + 1).contiguous();
      ASSERT_EQ(std::memcmp(one.data<float>(), row.data<float>(), one.nbytes()), 0)
          << cpu::paged_isa_name(isa) << " " << dtype_name(dtype) << " token " << t;
    }
  }
}

TEST(PagedAttentionKernels, EveryIsaMatchesFloat64AndIsBatchInvariant) {
  check_every_isa<float>(DType::f32);
  check_every_isa<BFloat16>(DType::bf16);
  check_every_isa<Half>(DType::f16);
  EXPECT_TRUE(cpu::paged_isa_supported(cpu::paged_isa()));
}

}  // namespace
