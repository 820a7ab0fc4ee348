// Every collective and reduce op on 2 and 4 forked ranks, through a file, Redis and TCP store,
// checked against values computed locally.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "rank_runner.h"
#include "support/temp_dir.h"

namespace zenith {
namespace {

namespace comm = communication;
using test::expect;
using zenith::testing::TempDir;

// Small integers, so float sums are exact and every dtype agrees on the expected value.
double value(int rank, size_t i) { return double(int64_t((rank + 1) * 7 + i * 3) % 101 - 50); }

Tensor rank_tensor(int rank, size_t count, DType dtype, size_t offset = 0) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(rank, i + offset);
  return Tensor::from_vector(v, {int64_t(count)}, dtype);
}

double reduce_ref(comm::ReduceOp op, int n, size_t i, DType dtype) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    const double v = value(r, i);
    if (op == comm::ReduceOp::MAX)
      acc = std::max(acc, v);
    else if (op == comm::ReduceOp::MIN)
      acc = std::min(acc, v);
    else
      acc += v;
  }
  if (op == comm::ReduceOp::AVG)
    acc = dtype == DType::f32 ? double(float(acc) / float(n)) : acc / double(n);
  return acc;
}

void expect_values(const Tensor& t, const std::function<double(size_t)>& want, const char* what) {
  auto got = t.to_double_vector();
  for (size_t i = 0; i < got.size(); ++i)
    expect(got[i] == want(i), what, ": element ", i, " is ", got[i], ", expected ", want(i));
}

const DType kDtypes[] = {DType::f32, DType::f64, DType::i32, DType::i64};

std::vector<comm::ReduceOp> ops_for(DType dtype) {
  std::vector<comm::ReduceOp> ops{comm::ReduceOp::SUM, comm::ReduceOp::MAX, comm::ReduceOp::MIN};
  if (is_floating(dtype)) ops.push_back(comm::ReduceOp::AVG);
  return ops;
}

// Element counts: empty blocks (1 < n), uneven blocks, a block of a few segments' worth.
const size_t kCounts[] = {1, 7, 1000, 70001};

void all_reduce_checks(int rank, int n) {
  for (DType dtype : kDtypes)
    for (auto op : ops_for(dtype))
      for (size_t count : kCounts) {
        auto t = rank_tensor(rank, count, dtype);
        comm::all_reduce(t, op);
        expect_values(
            t, [&](size_t i) { return reduce_ref(op, n, i, dtype); }, "all_reduce");
      }
  // Blocks of several 1 MiB segments, the last one partial.
  for (auto [dtype, op] :
       {std::pair{DType::f32, comm::ReduceOp::AVG}, std::pair{DType::i64, comm::ReduceOp::MIN}}) {
    const size_t count = (size_t(3) << 20) / itemsize(dtype) * size_t(n) + 12345;
    auto t = rank_tensor(rank, count, dtype);
    comm::all_reduce(t, op);
    expect_values(
        t, [&](size_t i) { return reduce_ref(op, n, i, dtype); }, "large all_reduce");
  }
}

void broadcast_checks(int rank, int n) {
  for (DType dtype : kDtypes)
    for (int root = 0; root < n; ++root)
      for (size_t count : {size_t(1), size_t(3000), size_t(dtype == DType::f64 ? 400000 : 10)}) {
        auto t = rank_tensor(rank, count, dtype);
        comm::broadcast(t, root);
        expect_values(
            t, [&](size_t i) { return value(root, i); }, "broadcast");
      }
}

void all_gather_checks(int rank, int n) {
  for (DType dtype : kDtypes)
    for (size_t count : {size_t(1), size_t(5), size_t(dtype == DType::i32 ? 300000 : 100)}) {
      auto in = rank_tensor(rank, count, dtype);
      // List form.
      std::vector<Tensor> outs;
      for (int r = 0; r < n; ++r) outs.push_back(Tensor::zeros({int64_t(count)}, dtype));
      comm::all_gather(outs, in);
      for (int r = 0; r < n; ++r)
        expect_values(
            outs[size_t(r)], [&](size_t i) { return value(r, i); }, "all_gather list");
      // Returning form: [n, count].
      auto stacked = comm::all_gather(in);
      expect(stacked.shape() == Shape{n, int64_t(count)}, "all_gather shape ",
             shape_str(stacked.shape()));
      expect_values(
          stacked, [&](size_t i) { return value(int(i / count), i % count); }, "all_gather tensor");
    }
  // In place: the input is this rank's slice of the output.
  auto out = Tensor::zeros({n, 4}, DType::f32);
  auto mine = out.select(0, rank);
  mine.copy_(rank_tensor(rank, 4, DType::f32).view({4}));
  comm::all_gather(out, mine);
  expect_values(
      out, [&](size_t i) { return value(int(i / 4), i % 4); }, "all_gather in place");
}

void reduce_scatter_checks(int rank, int n) {
  for (DType dtype : kDtypes)
    for (auto op : ops_for(dtype))
      for (size_t per_rank :
           {size_t(1), size_t(33), size_t(op == comm::ReduceOp::MAX ? 300000 : 1000)}) {
        auto in = rank_tensor(rank, per_rank * size_t(n), dtype);
        auto before = in.to_double_vector();
        auto out = Tensor::zeros({int64_t(per_rank)}, dtype);
        comm::reduce_scatter(out, in, op);
        expect_values(
            out, [&](size_t i) { return reduce_ref(op, n, rank * per_rank + i, dtype); },
            "reduce_scatter");
        expect(in.to_double_vector() == before, "reduce_scatter modified its input");
      }
}

enum class StoreKind { file, redis, tcp };

struct Param {
  int ranks;
  StoreKind store;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const char* store = info.param.store == StoreKind::file    ? "file"
                      : info.param.store == StoreKind::redis ? "redis"
                                                             : "tcp";
  return std::string(store) + std::to_string(info.param.ranks) + "ranks";
}

class Collectives : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    switch (GetParam().store) {
      case StoreKind::file:
        url_ = "file://" + dir_.str() + "/store";
        break;
      case StoreKind::redis:
        if (!test::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        redis_ = std::make_unique<test::RedisServer>();
        url_ = redis_->url();
        break;
      case StoreKind::tcp:
        url_ = "tcp://127.0.0.1:" + std::to_string(test::free_port());
        break;
    }
  }
  // Runs fn on every rank between init and release; fails the test with every rank's report.
  void run(const std::function<void(int, int)>& fn) {
    const int n = GetParam().ranks;
    const std::string url = url_;
    auto results = test::run_ranks(n, [&](int rank) {
      comm::init(test::rank_options(rank, n, url));
      expect(comm::get_rank() == rank && comm::get_group_size() == n, "rank/size");
      fn(rank, n);
      comm::release();
    });
    for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
  }

  TempDir dir_{"distributed"};
  std::unique_ptr<test::RedisServer> redis_;
  std::string url_;
};

TEST_P(Collectives, AllReduceEveryOpAndDtype) { run(all_reduce_checks); }
TEST_P(Collectives, BroadcastFromEveryRoot) { run(broadcast_checks); }
TEST_P(Collectives, AllGather) { run(all_gather_checks); }
TEST_P(Collectives, ReduceScatterEveryOpAndDtype) { run(reduce_scatter_checks); }

// The store only matters while ranks connect: one pass of every collective per store.
using Stores = Collectives;
TEST_P(Stores, EveryCollectiveOnce) {
  run([](int rank, int n) {
    auto t = rank_tensor(rank, 100003, DType::f32);
    comm::all_reduce(t);
    expect_values(
        t, [&](size_t i) { return reduce_ref(comm::ReduceOp::SUM, n, i, DType::f32); },
        "all_reduce");
    auto b = rank_tensor(rank, 1000, DType::i64);
    comm::broadcast(b, n - 1);
    expect_values(
        b, [&](size_t i) { return value(n - 1, i); }, "broadcast");
    auto g = comm::all_gather(rank_tensor(rank, 10, DType::f64));
    expect_values(
        g, [&](size_t i) { return value(int(i / 10), i % 10); }, "all_gather");
    auto out = Tensor::zeros({10}, DType::i32);
    comm::reduce_scatter(out, rank_tensor(rank, 10 * size_t(n), DType::i32), comm::ReduceOp::MAX);
    expect_values(
        out,
        [&](size_t i) {
          return reduce_ref(comm::ReduceOp::MAX, n, size_t(rank) * 10 + i, DType::i32);
        },
        "reduce_scatter");
    auto empty = Tensor::zeros({0}, DType::f64);  // nothing to send; still a collective
    comm::all_reduce(empty);
    comm::broadcast(empty, 0);
    expect(comm::all_gather(empty).shape() == Shape{n, 0}, "empty all_gather");
    comm::barrier();
  });
}

TEST_P(Collectives, BarrierWaitsForTheSlowestRank) {
  const auto marker = dir_.str() + "/slow_rank_done";
  run([&](int rank, int n) {
    if (rank == n - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::FILE* f = std::fopen(marker.c_str(), "w");
      std::fclose(f);
    }
    comm::barrier();
    expect(std::filesystem::exists(marker), "rank ", rank, " left the barrier before rank ", n - 1,
           " entered it");
  });
}

INSTANTIATE_TEST_SUITE_P(Dist, Collectives,
                         ::testing::Values(Param{2, StoreKind::file}, Param{4, StoreKind::file}),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Dist, Stores,
                         ::testing::Values(Param{2, StoreKind::redis}, Param{4, StoreKind::redis},
                                           Param{2, StoreKind::tcp}, Param{4, StoreKind::tcp}),
                         param_name);

}  // namespace
}  // namespace zenith
