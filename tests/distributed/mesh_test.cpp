// The device mesh and placements: rank arithmetic and degree validation without communication;
// then on 4 forked ranks the sub-groups, collectives per sub-group with their byte counts,
// pipeline point-to-point, and a dead pipeline peer named in the error.
#include "distributed/mesh.h"

#include <gtest/gtest.h>

#include <csignal>

#include "distributed/placement.h"
#include "rank_runner.h"
#include "support/temp_dir.h"

namespace zenith {
namespace {

namespace comm = communication;
using distributed::DeviceMesh;
using distributed::MeshDim;
using distributed::MeshLayout;
using distributed::Placement;
using test::contains;
using test::expect;
using zenith::testing::TempDir;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Mesh, TensorIsFastestThenDataThenPipeline) {
  MeshLayout l({.pipeline = 2, .data = 2, .tensor = 2}, 8);
  EXPECT_EQ(l.rank_of({1, 0, 1}), 5);
  EXPECT_EQ(l.coord_of(6), (distributed::MeshCoord{1, 1, 0}));
  EXPECT_EQ(l.group_ranks(MeshDim::tensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(l.group_ranks(MeshDim::data, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(l.group_ranks(MeshDim::pipeline, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(MeshLayout({.pipeline = 2, .tensor = 3}, 12).data_degree(), 2);  // the rest
  EXPECT_EQ(l.describe(), "pipeline 2 x data 2 x tensor 2 (8 ranks)");
}

TEST(Mesh, DegreesThatDoNotFitTheWorldAreClearErrors) {
  auto msg = error_of([] { MeshLayout({.pipeline = 2, .data = 2, .tensor = 2}, 6); });
  EXPECT_TRUE(contains(msg, "pipeline 2 x data 2 x tensor 2 = 8 ranks, but the job has 6")) << msg;
  msg = error_of([] { MeshLayout({.pipeline = 1, .tensor = 4}, 6); });
  EXPECT_TRUE(contains(msg, "must be a multiple of 4")) << msg;
  msg = error_of([] { MeshLayout({.pipeline = 0}, 2); });
  EXPECT_TRUE(contains(msg, "degrees must be >= 1")) << msg;
}

TEST(Placement, UnevenChunksFollowTorchChunk) {
  // 10 rows over 4 ranks: 3, 3, 3, 1; 5 over 4: 2, 2, 1, 0.
  EXPECT_EQ(distributed::chunk_of(10, 4, 3).offset, 9);
  EXPECT_EQ(distributed::chunk_of(10, 4, 3).length, 1);
  EXPECT_EQ(distributed::chunk_of(5, 4, 3).length, 0);
  EXPECT_EQ(distributed::chunk_of(5, 4, 3).offset, 5);
  auto s = distributed::local_shard({7, 6}, 1, 4, 3);
  EXPECT_EQ(s.shape, (Shape{7, 0}));
  EXPECT_TRUE(s.empty());
  // Data Shard(0) then tensor Shard(0) nest; tensor Shard(1) on another dimension.
  MeshLayout l({.pipeline = 1, .data = 2, .tensor = 2}, 4);
  distributed::TensorPlacement p;
  p[MeshDim::data] = Placement::shard(0);
  p[MeshDim::tensor] = Placement::shard(0);
  auto nested = distributed::local_shard({10, 3}, p, l, l.coord_of(3));  // data 1, tensor 1
  EXPECT_EQ(nested.offset, (Shape{8, 0}));
  EXPECT_EQ(nested.shape, (Shape{2, 3}));
  p[MeshDim::tensor] = Placement::shard(1);
  auto grid = distributed::local_shard({10, 3}, p, l, l.coord_of(1));  // data 0, tensor 1
  EXPECT_EQ(grid.offset, (Shape{0, 2}));
  EXPECT_EQ(grid.shape, (Shape{5, 1}));
  EXPECT_EQ(p.str(), "[pipeline Replicate(), data Shard(0), tensor Shard(1)]");
  auto full = Tensor::arange(30, DType::f32).reshape({10, 3});
  auto block = distributed::slice_shard(full, grid).contiguous();
  EXPECT_EQ(block.to_double_vector(), (std::vector<double>{2, 5, 8, 11, 14}));
}

// pipeline 2 x tensor 2: groups, a collective in each, the byte counts of a real
// reduce-scatter, and activations/gradients between the stages.
TEST(Mesh, SubGroupCollectivesAndPipelineMessagesOnFourRanks) {
  TempDir dir("mesh");
  auto results = test::run_ranks(4, [&](int rank) {
    comm::init(test::rank_options(rank, 4, "file://" + dir.str()));
    auto mesh = DeviceMesh::create({.pipeline = 2, .tensor = 2});
    expect(mesh.data_rank() == 0 && mesh.degree(MeshDim::data) == 1, mesh.describe());
    const auto& tp = mesh.tensor_group();
    expect(tp.size() == 2 && tp.ranks()[0] == rank / 2 * 2, "tensor group of ", rank);
    expect(mesh.pipeline_group().ranks() == std::vector<int>{rank % 2, rank % 2 + 2},
           "pipeline group of ", rank);
    // all_reduce within the tensor group only: ranks 0+1 and 2+3.
    auto t = Tensor::full({3}, double(rank));
    comm::all_reduce(t, comm::ReduceOp::SUM, tp);
    expect(t.to_double_vector()[0] == (rank < 2 ? 1 : 5), "tensor all_reduce on ", rank);
    // A real reduce-scatter: each rank sends (n-1)/n of the input, not an all-reduce's 2x.
    const int64_t count = 1 << 20;  // 4 MiB of float32, above the direct all-reduce size
    auto input = Tensor::full({count}, double(rank + 1));
    auto output = Tensor::empty({count / 2});
    const auto before = mesh.traffic(MeshDim::tensor);
    comm::reduce_scatter(output, input, comm::ReduceOp::SUM, tp);
    const auto after = mesh.traffic(MeshDim::tensor);
    const uint64_t payload = uint64_t(count) * 4 / 2;  // (n-1)/n of 4 MiB
    const uint64_t sent = after.bytes_sent - before.bytes_sent;
    expect(sent >= payload && sent < payload + 4096, "reduce_scatter sent ", sent, " bytes, ring ",
           payload);
    expect(output.to_double_vector()[7] == (rank < 2 ? 3 : 7), "reduce_scatter value");
    // Pipeline: stage 0 sends activations forward, stage 1 sends gradients back.
    auto act = Tensor::full({2, 5}, mesh.pipeline_rank() == 0 ? 10.0 + rank : 0.0);
    auto grad = Tensor::full({2, 5}, mesh.pipeline_rank() == 1 ? 20.0 + rank : 0.0);
    if (mesh.pipeline_rank() == 0) {
      auto s = mesh.send_next_async(act);
      mesh.recv_next(grad);  // the other direction does not wait behind the send
      s.wait();
      expect(grad.to_double_vector()[9] == 22.0 + rank, "gradient from stage 1");
    } else {
      auto s = mesh.send_prev_async(grad);
      mesh.recv_prev(act);
      s.wait();
      expect(act.to_double_vector()[0] == 8.0 + rank, "activation from stage 0");
    }
    const auto pp = mesh.traffic(MeshDim::pipeline);
    expect(pp.bytes_sent >= 40 && pp.bytes_received >= 40, "pipeline traffic ", pp.bytes_sent);
    expect(contains(error_of([&] {
                      mesh.pipeline_rank() == 0 ? mesh.send_prev(act) : mesh.send_next(act);
                    }),
                    "pipeline stage"),
           "send past the ends");
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(Mesh, DeadPipelinePeerIsAnErrorNamingItsRank) {
  TempDir dir("mesh");
  auto results = test::run_ranks(2, [&](int rank) {
    comm::init(test::rank_options(rank, 2, "file://" + dir.str(), std::chrono::seconds(2)));
    auto mesh = DeviceMesh::create({.pipeline = 2});
    if (rank == 1) raise(SIGKILL);
    auto act = Tensor::ones({64});
    const std::string msg = error_of([&] {
      mesh.send_next(act);
      mesh.recv_next(act);
    });
    expect(contains(msg, "rank 1"), "error does not name rank 1: '", msg, "'");
  });
  EXPECT_TRUE(results[0].ok()) << test::describe(results);
  EXPECT_EQ(results[1].signal, SIGKILL);
}

}  // namespace
}  // namespace zenith
