// Time blocked in communication, per mesh group (GroupTraffic::blocked_seconds): a rank that
// reaches a collective late shows as blocked time on the rank that waits for it, for blocking
// and asynchronous collectives and for the pipeline's point-to-point links, and the difference
// of two readings is one step's. Only lower bounds on time: a loaded host makes waits longer.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "distributed/mesh.h"
#include "rank_runner.h"
#include "support/temp_dir.h"

namespace zenith {
namespace {

namespace comm = communication;
using distributed::GroupTraffic;
using distributed::MeshDim;
using test::expect;
using zenith::testing::TempDir;

constexpr auto kLate = std::chrono::milliseconds(500);
constexpr double kAtLeast = 0.25;  // seconds the waiting rank must see of the other's 0.5

void run_ok(const std::function<void(int)>& fn) {
  TempDir dir("comm_wait");
  auto results = test::run_ranks(2, [&](int rank) {
    comm::init(test::rank_options(rank, 2, "file://" + dir.str()));
    fn(rank);
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(CommWait, LatePeerShowsAsBlockedTimePerStep) {
  run_ok([](int rank) {
    auto mesh = distributed::DeviceMesh::create({.tensor = 2});
    const comm::Group& tp = mesh.tensor_group();
    auto t = Tensor::full({64}, 1.0);
    // Step 1: rank 1 is late to a blocking all-reduce; rank 0 waits for it.
    comm::barrier(tp);
    GroupTraffic before = mesh.traffic(MeshDim::tensor);
    if (rank == 1) std::this_thread::sleep_for(kLate);
    comm::all_reduce(t, comm::ReduceOp::SUM, tp);
    GroupTraffic step = mesh.traffic(MeshDim::tensor) - before;
    expect(step.calls == 1, "step 1: ", step.calls, " calls");
    if (rank == 0)
      expect(step.blocked_seconds >= kAtLeast, "step 1: rank 0 blocked ", step.blocked_seconds,
             " s behind a peer 0.5 s late");
    // Step 2: rank 0 is late to an asynchronous all-gather; rank 1's wait() holds the time.
    comm::barrier(tp);
    before = mesh.traffic(MeshDim::tensor);
    if (rank == 0) std::this_thread::sleep_for(kLate);
    auto out = Tensor::empty({128});
    comm::all_gather_async(out, t, tp).wait();
    step = mesh.traffic(MeshDim::tensor) - before;
    expect(step.calls == 1 && step.bytes_sent >= 64 * 4, "step 2: ", step.calls, " calls, ",
           step.bytes_sent, " bytes");
    if (rank == 1)
      expect(step.blocked_seconds >= kAtLeast, "step 2: rank 1 blocked ", step.blocked_seconds,
             " s behind a peer 0.5 s late");
    // The other groups of the mesh saw nothing.
    expect(mesh.traffic(MeshDim::data).blocked_seconds == 0, "data group blocked");
  });
}

TEST(CommWait, PipelineReceiveWaitsForALateStage) {
  run_ok([](int rank) {
    auto mesh = distributed::DeviceMesh::create({.pipeline = 2});
    auto act = Tensor::full({4, 8}, double(rank));
    comm::barrier();
    const GroupTraffic before = mesh.traffic(MeshDim::pipeline);
    if (mesh.pipeline_rank() == 0) {
      std::this_thread::sleep_for(kLate);
      mesh.send_next(act);
    } else {
      mesh.recv_prev_async(act).wait();
    }
    const GroupTraffic step = mesh.traffic(MeshDim::pipeline) - before;
    if (mesh.pipeline_rank() == 1) {
      expect(act.to_double_vector()[0] == 0.0, "activation from stage 0");
      expect(step.blocked_seconds >= kAtLeast, "stage 1 blocked ", step.blocked_seconds,
             " s behind a stage 0.5 s late");
    }
  });
}

}  // namespace
}  // namespace zenith
