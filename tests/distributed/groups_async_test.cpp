// Sub-groups, asynchronous collectives and the per-process counters.
#include <gtest/gtest.h>

#include "rank_runner.h"
#include "support/temp_dir.h"

namespace zenith {
namespace {

namespace comm = communication;
using test::expect;
using zenith::testing::TempDir;

void run_ok(int n, const std::string& url, const std::function<void(int, int)>& fn) {
  auto results = test::run_ranks(n, [&](int rank) {
    comm::init(test::rank_options(rank, n, url));
    fn(rank, n);
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(DistGroups, SubGroupsReduceOnlyTheirMembers) {
  TempDir dir("distributed");
  run_ok(4, "file://" + dir.str(), [](int rank, int n) {
    auto evens = comm::new_group({0, 2});
    auto odds = comm::new_group({1, 3});
    auto reordered = comm::new_group({3, 1, 0});
    auto& mine = rank % 2 == 0 ? evens : odds;
    expect(mine.is_member() && mine.size() == 2 && mine.rank() == rank / 2, "membership of ", rank);
    auto t = Tensor::full({5}, double(rank + 1), DType::f32);
    comm::all_reduce(t, comm::ReduceOp::SUM, mine);
    const double want = rank % 2 == 0 ? 1 + 3 : 2 + 4;
    expect(t.to_double_vector() == std::vector<double>(5, want), "group sum on rank ", rank);

    // Broadcast roots are world ranks; group ranks follow the list's order.
    if (reordered.is_member()) {
      expect(reordered.rank() == (rank == 3 ? 0 : rank == 1 ? 1 : 2), "reordered rank");
      auto b = Tensor::full({3}, double(rank), DType::i64);
      comm::broadcast(b, 1, reordered);
      expect(b.to_double_vector() == std::vector<double>(3, 1.0), "broadcast root 1");
      auto gathered = comm::all_gather(Tensor::full({1}, double(rank), DType::i32), reordered);
      expect(gathered.to_double_vector() == std::vector<double>{3, 1, 0}, "gather order");
    } else {
      expect(reordered.rank() == -1, "non-member rank");
      try {
        comm::barrier(reordered);
        expect(false, "barrier on a group without this rank did not throw");
      } catch (const Error& e) {
        expect(test::contains(e.what(), "not a member of group3"), e.what());
      }
    }
    // Groups and the world interleave freely.
    auto w = Tensor::full({2}, 1.0, DType::f64);
    comm::all_reduce(w);
    expect(w.to_double_vector() == std::vector<double>(2, double(n)), "world after groups");
  });
}

TEST(DistGroups, NewGroupValidatesRanks) {
  comm::init(test::rank_options(0, 1, ""));
  EXPECT_THROW(comm::new_group({}), Error);
  EXPECT_THROW(comm::new_group({0, 0}), Error);
  try {
    comm::new_group({0, 1});
    ADD_FAILURE() << "rank out of range accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "[communication] new_group: rank 1 out of range"))
        << e.what();
  }
  auto solo = comm::new_group({0});
  auto t = Tensor::full({3}, 2.0);
  comm::all_reduce(t, comm::ReduceOp::AVG, solo);
  EXPECT_EQ(t.to_double_vector(), std::vector<double>(3, 2.0));
  comm::release();
}

TEST(DistAsync, OverlapsWithTheCallerAndKeepsOrder) {
  TempDir dir("distributed");
  run_ok(2, "file://" + dir.str(), [](int rank, int n) {
    // A large all_reduce runs on the communication thread while this thread computes.
    const int64_t big = 8 << 20;  // 32 MiB of float32
    auto grads = Tensor::full({big}, double(rank + 1), DType::f32);
    auto small = Tensor::full({4}, double(rank), DType::f64);
    const auto start = std::chrono::steady_clock::now();
    comm::Work w1 = comm::all_reduce_async(grads);
    comm::Work w2 = comm::all_reduce_async(small, comm::ReduceOp::MAX);
    const double issue_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    bool seen_pending = !w1.is_completed();
    double local = 0;  // work the caller does meanwhile
    for (int i = 0; i < 2000000; ++i) local += std::sqrt(double(i));
    w2.wait();  // queued after w1 on the same group: completes after it
    expect(w1.is_completed(), "work completed out of order");
    w1.wait();
    expect(seen_pending, "a 32 MiB all_reduce completed before all_reduce_async returned");
    expect(issue_ms < 1000, "issuing async work took ", issue_ms, " ms");  // loaded CI boxes
    expect(local > 0, "");
    auto g = grads.to_float_vector();
    expect(g.front() == 3.0f && g.back() == 3.0f && g[size_t(big / 2)] == 3.0f, "big sum");
    expect(small.to_double_vector() == std::vector<double>(4, double(n - 1)), "small max");

    // Bad arguments throw at the call, before anything is queued.
    auto f16 = Tensor::zeros({2}, DType::f16);
    try {
      comm::all_reduce_async(f16);
      expect(false, "float16 accepted");
    } catch (const Error& e) {
      expect(test::contains(e.what(), "has dtype float16"), e.what());
    }
    auto b = comm::barrier_async();
    b.wait();
    expect(b.is_completed(), "barrier not completed after wait");
  });
}

TEST(DistStats, CountsBytesCallsAndTime) {
  TempDir dir("distributed");
  run_ok(4, "file://" + dir.str(), [](int rank, int n) {
    comm::reset_stats();
    const int64_t count = 1 << 20;  // 4 MiB of float32
    auto t = Tensor::ones({count}, DType::f32);
    comm::all_reduce(t);
    comm::broadcast(t, 0);
    const auto s = comm::stats();
    expect(s.calls == 2 && s.failures == 0, "calls ", s.calls, " failures ", s.failures);
    // A ring all_reduce sends 2(n-1)/n of the tensor; the input check adds a few hundred bytes.
    const uint64_t ring = uint64_t(2 * (n - 1)) * uint64_t(count * 4) / uint64_t(n);
    const auto& ar = s.by_op.at("all_reduce");
    expect(ar.calls == 1 && ar.bytes_sent >= ring && ar.bytes_sent < ring + 4096,
           "all_reduce sent ", ar.bytes_sent, " bytes, ring volume ", ring);
    expect(ar.bytes_received == ar.bytes_sent, "sent ", ar.bytes_sent, " received ",
           ar.bytes_received);
    // A chain broadcast: every rank but the last sends the tensor once, every rank but the root
    // receives it once.
    const auto& bc = s.by_op.at("broadcast");
    const uint64_t payload = uint64_t(count) * 4;
    expect((bc.bytes_sent >= payload) == (rank != n - 1), "broadcast sent ", bc.bytes_sent);
    expect((bc.bytes_received >= payload) == (rank != 0), "broadcast received ", bc.bytes_received);
    expect(s.seconds > 0 && s.seconds == ar.seconds + bc.seconds, "seconds");
    expect(s.bytes_sent == ar.bytes_sent + bc.bytes_sent, "total bytes");
  });
}

}  // namespace
}  // namespace zenith
