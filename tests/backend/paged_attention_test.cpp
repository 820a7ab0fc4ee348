// The paged attention kernels (src/backend/cpu/paged_attention*) on every instruction set this
// CPU runs against the float64 reference, and each one's tokens bit-identical alone and batched.
#include "backend/cpu/paged_attention.h"

#include <cstring>

#include "support/op_check.h"
#include "support/paged_case.h"

using namespace zenith;
using namespace zenith::testing;
using cpu::PagedIsa;

namespace {

Tensor run(PagedIsa isa, const PagedCase& c, int64_t first, int64_t count) {
  const Tensor q = c.q.to(DType::f32).slice(2, first, first + count).contiguous();
  const Tensor k = c.k.to(DType::f32), v = c.v.to(DType::f32);
  const Tensor seq = c.seq.slice(0, first, first + count).contiguous();
  const Tensor pos = c.pos.slice(0, first, first + count).contiguous();
  Tensor out = Tensor::empty(q.shape());
  cpu::paged_attention_f32(
      isa, {q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(),
            c.table.data<int32_t>(), seq.data<int32_t>(), pos.data<int32_t>(), q.size(1), k.size(2),
            count, q.size(3), k.size(1), c.table.size(1), float(1 / std::sqrt(double(q.size(3))))});
  return out;
}

TEST(PagedAttentionKernels, EveryIsaMatchesFloat64AndIsBatchInvariant) {
  const PagedCase c = paged_case(8, 2, 72, 16, {3, 50, 200}, {3, 1, 9}, 11);
  const Tensor want = paged_reference(c);
  const int64_t n = c.q.size(2);
  for (PagedIsa isa : {PagedIsa::scalar, PagedIsa::avx2, PagedIsa::avx512}) {
    if (!cpu::paged_isa_supported(isa)) continue;  // the AVX-512 path on a CPU without it
    const Tensor batched = run(isa, c, 0, n);
    EXPECT_TRUE(all_close(batched, want, 1e-5, 1e-6)) << cpu::paged_isa_name(isa);
    for (int64_t t = 0; t < n; ++t) {
      const Tensor one = run(isa, c, t, 1);
      const Tensor row = batched.slice(2, t, t + 1).contiguous();
      ASSERT_EQ(std::memcmp(one.data<float>(), row.data<float>(), one.nbytes()), 0)
          << cpu::paged_isa_name(isa) << " token " << t;
    }
  }
  EXPECT_TRUE(cpu::paged_isa_supported(cpu::paged_isa()));
}

}  // namespace
