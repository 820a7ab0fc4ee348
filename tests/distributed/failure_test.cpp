// What ranks see when something goes wrong: a peer killed mid-collective, a hung peer, ranks
// that disagree on a collective, bad arguments, a rank that never joins.
#include <gtest/gtest.h>

#include <fstream>

#include "distributed/nccl_backend.h"
#include "rank_runner.h"
#include "support/temp_dir.h"

namespace zenith {
namespace {

namespace comm = communication;
using test::contains;
using test::expect;
using Clock = std::chrono::steady_clock;
using zenith::testing::TempDir;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(DistFailure, PeerKilledMidCollectiveGivesErrorsWithinTheTimeout) {
  TempDir dir("distributed");
  const int n = 3;
  const auto timeout = std::chrono::seconds(3);
  auto results = test::run_ranks(n, [&](int rank) {
    comm::init(test::rank_options(rank, n, "file://" + dir.str(), timeout));
    auto warmup = Tensor::ones({16});
    comm::all_reduce(warmup);
    auto big = Tensor::ones({int64_t(16) << 20}, DType::f32);  // 64 MiB: takes a while
    if (rank == 2) {
      auto work = comm::all_reduce_async(big);
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      raise(SIGKILL);  // dies with the collective in flight
    }
    // If the first all_reduce were somehow done before rank 2 died, the second cannot be.
    auto start = Clock::now();
    try {
      comm::all_reduce(big);
      start = Clock::now();
      comm::all_reduce(big);
      expect(false, "all_reduce succeeded with rank 2 dead");
    } catch (const Error& e) {
      const double took = seconds_since(start);
      const std::string msg = e.what();
      expect(contains(msg, "[communication] all_reduce "), msg);
      expect(contains(msg, "timed out after 3 s waiting for rank") || contains(msg, "lost ("), msg);
      expect(took < 3.0 + 1.5, "error after ", took, " s with a 3 s timeout: ", msg);
      std::fprintf(stderr, "rank %d after %.2f s: %s\n", rank, took, msg.c_str());
    }
    // The group is closed for good; it says so at once.
    try {
      comm::barrier();
      expect(false, "barrier after a failure succeeded");
    } catch (const Error& e) {
      expect(contains(e.what(), "unusable after an earlier failure"), e.what());
    }
    comm::release();  // must not hang either
  });
  EXPECT_EQ(results[2].signal, SIGKILL) << test::describe(results);
  EXPECT_TRUE(results[0].ok() && results[1].ok()) << test::describe(results);
}

TEST(DistFailure, HungPeerTimesOutNamingTheRank) {
  TempDir dir("distributed");
  const int n = 3;
  const auto marker = dir.str() + "/survivors_done";
  auto results = test::run_ranks(n, [&](int rank) {
    auto opts =
        test::rank_options(rank, n, "file://" + dir.str() + "/store", std::chrono::seconds(2));
    opts.check_inputs = 0;  // time out inside the ring itself, not in the input check
    comm::init(opts);
    comm::barrier();
    if (rank == 2) {  // alive but never joins: wait for the others to give up, then leave
      for (int i = 0; i < 1000 && !std::filesystem::exists(marker); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      _exit(0);
    }
    const auto start = Clock::now();
    auto t = Tensor::ones({1000});
    try {
      comm::all_reduce_async(t).wait();
      expect(false, "all_reduce succeeded without rank 2");
    } catch (const Error& e) {
      const double took = seconds_since(start);
      std::fprintf(stderr, "rank %d after %.2f s: %s\n", rank, took, e.what());
      expect(took > 1.0 && took < 2.0 + 1.5, "error after ", took, " s: ", e.what());
      // Rank 0 receives from rank 2 in the ring; rank 1 may instead see rank 0 give up.
      if (rank == 0)
        expect(contains(e.what(),
                        "[communication] all_reduce timed out after 2 s waiting for "
                        "rank 2"),
               e.what());
    }
    if (rank == 0) std::ofstream(marker) << "done";
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(DistFailure, MismatchedCollectivesAreReportedOnEveryRank) {
  TempDir dir("distributed");
  auto results = test::run_ranks(2, [&](int rank) {
    comm::init(test::rank_options(rank, 2, "file://" + dir.str()));
    auto expect_mismatch = [&](const std::function<void()>& call, const char* want) {
      try {
        call();
        expect(false, "mismatch not detected: ", want);
      } catch (const Error& e) {
        expect(contains(e.what(), "ranks called different collectives"), e.what());
        expect(contains(e.what(), want), "'", e.what(), "' lacks '", want, "'");
      }
    };
    expect_mismatch([&] { comm::all_reduce(Tensor::ones({rank == 0 ? 4 : 8})); },
                    "rank 0 all_reduce(SUM) of float32 [4] as collective #1; rank 1 "
                    "all_reduce(SUM) of float32 [8]");
    expect_mismatch([&] { comm::all_reduce(Tensor::ones({4}, rank ? DType::f64 : DType::f32)); },
                    "of float64 [4]");
    expect_mismatch(
        [&] {
          if (rank == 0)
            comm::all_reduce(Tensor::ones({4}), comm::ReduceOp::MAX);
          else
            comm::broadcast(Tensor::ones({4}), 0);
        },
        "broadcast(root 0) of float32 [4]");
    expect_mismatch([&] { comm::broadcast(Tensor::ones({4}), rank); }, "(root 1)");
    // Nothing was sent, so the group is still healthy.
    auto t = Tensor::full({3}, double(rank + 1));
    comm::all_reduce(t);
    expect(t.to_double_vector() == std::vector<double>(3, 3.0), "all_reduce after mismatches");
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(DistFailure, MismatchWithoutTheCheckTimesOutInsteadOfCrashing) {
  TempDir dir("distributed");
  auto results = test::run_ranks(2, [&](int rank) {
    auto opts = test::rank_options(rank, 2, "file://" + dir.str(), std::chrono::seconds(1));
    opts.check_inputs = 0;
    comm::init(opts);
    try {
      // Same algorithm and message tags, different message sizes: the messages must never
      // meet (Gloo would abort the receiving process on a message larger than the receive).
      comm::all_reduce(Tensor::ones({rank == 0 ? 100000 : 200000}));
      expect(false, "mismatched all_reduce succeeded");
    } catch (const Error& e) {
      expect(
          contains(e.what(), "[communication] all_reduce timed out after 1 s waiting for rank ") ||
              contains(e.what(), "lost ("),
          e.what());
      if (contains(e.what(), "timed out"))
        expect(contains(e.what(), "ZENITH_COMM_CHECK=1 compares calls"), e.what());
    }
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

void expect_error(const std::function<void()>& call, const std::string& want) {
  try {
    call();
    ADD_FAILURE() << "no error; expected " << want;
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), want)) << "'" << e.what() << "' lacks '" << want << "'";
  }
}

TEST(DistFailure, BadArgumentsAreRejectedBeforeAnythingIsSent) {
  expect_error([] { comm::get_rank(); }, "[communication] not initialized");
  expect_error([] { comm::all_reduce(Tensor::ones({2})); }, "not initialized");
  comm::init(test::rank_options(0, 1, ""));
  expect_error([] { comm::init(test::rank_options(0, 1, "")); }, "init() called twice");
  expect_error([] { comm::all_reduce(Tensor::ones({2, 3}).t()); }, "must be contiguous");
  expect_error([] { comm::all_reduce(Tensor::ones({2}, DType::f16)); }, "has dtype float16");
  expect_error([] { comm::all_reduce(Tensor()); }, "tensor is undefined");
  expect_error([] { comm::all_reduce(Tensor::ones({2}, DType::i32), comm::ReduceOp::AVG); },
               "ReduceOp::AVG needs a floating-point tensor, got int32");
  expect_error([] { comm::broadcast(Tensor::ones({2}), 3); }, "root 3 is not a rank of world");
  expect_error(
      [] {
        comm::all_gather({Tensor::ones({2}), Tensor::ones({2})}, Tensor::ones({2}));
      },
      "expected 1 output tensors");
  expect_error([] { comm::all_gather(std::vector<Tensor>{Tensor::ones({3})}, Tensor::ones({2})); },
               "each output must match the input");
  expect_error([] { comm::all_gather(Tensor::ones({3}), Tensor::ones({2})); },
               "output must be float32 with 1 x 2 elements");
  expect_error([] { comm::reduce_scatter(Tensor::ones({2}), Tensor::ones({3})); },
               "input must be float32 with 1 x 2 elements");
  // A group of one still runs every collective.
  auto t = Tensor::full({3}, 5.0);
  comm::all_reduce(t, comm::ReduceOp::AVG);
  comm::broadcast(t, 0);
  comm::barrier();
  EXPECT_EQ(comm::all_gather(t).shape(), (Shape{1, 3}));
  EXPECT_EQ(t.to_double_vector(), std::vector<double>(3, 5.0));
  comm::release();
  comm::release();  // twice is harmless
  EXPECT_FALSE(comm::is_initialized());
}

TEST(DistFailure, RankThatNeverJoinsFailsInitWithinTheTimeout) {
  TempDir dir("distributed");
  auto results = test::run_ranks(1, [&](int) {
    const auto start = Clock::now();
    try {
      comm::init(test::rank_options(0, 2, "file://" + dir.str(), std::chrono::seconds(1)));
      expect(false, "init succeeded without rank 1");
    } catch (const Error& e) {
      expect(contains(e.what(),
                      "[communication] rendezvous timed out after 1 s waiting for "
                      "key(s)"),
             e.what());
      expect(contains(e.what(), "world/1"), e.what());
      expect(seconds_since(start) < 3.0, "took ", seconds_since(start), " s");
    }
    expect(!comm::is_initialized(), "initialized after a failed init");
  });
  EXPECT_TRUE(results[0].ok()) << test::describe(results);
}

TEST(DistFailure, CudaTensorsGoToNcclOrFailClearly) {
  auto results = test::run_ranks(1, [&](int) {
    comm::init(test::rank_options(0, 1, ""));
    // The core cannot allocate CUDA memory yet: a CPU buffer labelled cuda:0 reaches the
    // device dispatch, which is what this test is about.
    auto cpu = Tensor::ones({4});
    auto impl = std::make_shared<TensorImpl>(cpu.impl());
    impl->device = Device{DeviceType::CUDA, 0};
    const Tensor cuda(impl);
    try {
      comm::all_gather(std::vector<Tensor>{cuda}, cpu);
      expect(false, "mixed devices accepted");
    } catch (const Error& e) {
      expect(contains(e.what(), "tensors on different devices (cuda:0 and cpu)"), e.what());
    }
    if (distributed::nccl_available() && std::filesystem::exists("/dev/nvidia0"))
      return;  // a real GPU would be handed a host pointer: nothing more to check here
    try {
      comm::all_reduce(cuda);
      expect(false, "all_reduce on cuda:0 succeeded");
    } catch (const Error& e) {
      std::fprintf(stderr, "cuda tensor: %s\n", e.what());
      if (!distributed::nccl_available())
        expect(contains(e.what(), "[communication] nccl backend not available in this build"),
               e.what());
      else  // NCCL built in, no GPU on this machine: the CUDA runtime's error, cleanly
        expect(contains(e.what(), "[communication] cudaSetDevice"), e.what());
    }
  });
  EXPECT_TRUE(results[0].ok()) << test::describe(results);
}

}  // namespace
}  // namespace zenith
