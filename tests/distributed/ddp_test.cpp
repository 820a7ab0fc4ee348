// DistributedDataParallel across forked rank processes: equivalence with one process on the
// combined batch, broadcast at start, buckets, unused parameters, metric reduction, a dead rank.
// Every rank (and the single-process reference) runs in a child process: the parent never
// starts OpenMP threads, so fork() stays safe.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "rank_runner.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using test::contains;
using test::expect;
using zenith::testing::TempDir;
using zenith::testing::throws_with;

constexpr int64_t kSteps = 20;

// Fixed synthetic Fashion-MNIST-shaped data: kSteps * global_batch images, labels 0..9.
dataset::Dataset synthetic_data(int64_t samples) {
  auto saved = default_generator().state();
  manual_seed(1234);
  Tensor x = Tensor::randn({samples, 1, 28, 28});
  default_generator().set_state(saved);
  std::vector<int64_t> labels = std::vector<int64_t>(size_t(samples));
  for (int64_t i = 0; i < samples; ++i) labels[size_t(i)] = (i * 7) % 10;
  return dataset::TensorDataset({x, Tensor::from_vector(labels, {samples})}, {"image", "label"});
}

void write_params(const std::string& path, const nn::Cell& net) {
  std::ofstream out(path, std::ios::binary);
  for (auto& [_, p] : net.named_parameters()) {
    auto v = p.contiguous().to_float_vector();
    out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  }
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// Trains SeedCNN for kSteps with momentum SGD. world == 0: one process, batch `global_batch`;
// else this rank of `world` under DDP with batch global_batch / world. Writes the parameters.
void train_seed_cnn(int rank, int world, int64_t global_batch, const std::string& store,
                    const std::string& out, double bucket_cap_mb) {
  context::set_num_threads(1);
  dataset::config::set_seed(99);
  manual_seed(uint64_t(7 + rank));  // ranks start different: the broadcast must fix that
  nn::CellPtr net = models::seed_cnn(1, 28, 10);
  auto data = synthetic_data(kSteps * global_batch);
  dataset::Dataset train;
  std::shared_ptr<nn::DistributedDataParallelImpl> ddp;
  if (world == 0) {
    train = data.shuffle().batch(global_batch, true);
  } else {
    comm::init(test::rank_options(rank, world, store));
    ddp = nn::DistributedDataParallel(net, {.bucket_cap_mb = bucket_cap_mb});
    net = ddp;
    train = dataset::DistributedSampler(data, world, rank).batch(global_batch / world, true);
  }
  expect(train.get_dataset_size() == kSteps, "expected ", kSteps, " steps, got ",
         train.get_dataset_size());
  auto opt = nn::Momentum(net->trainable_params(), 0.05, 0.9);
  Model model(net, nn::SoftmaxCrossEntropyWithLogits(true), opt);
  model.train(1, train);
  expect(model.global_step() == kSteps, "trained ", model.global_step(), " steps");
  if (ddp) {
    const auto& st = ddp->stats();
    expect(st.steps == kSteps, "ddp synchronised ", st.steps, " steps");
    expect(st.buckets_reduced == kSteps * int64_t(ddp->bucket_layout().size()), "buckets reduced ",
           st.buckets_reduced);
    if (ddp->bucket_layout().size() > 1)
      expect(st.buckets_overlapped >= kSteps,
             "no bucket started during backward: ", st.buckets_overlapped);
  }
  write_params(out, world == 0 ? *net : *ddp->module());
  if (world) comm::release();
}

// max over parameters of |a - b| / max |b|, elementwise within the flat vectors.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / scale;
}

void check_equivalence(int world, int64_t per_rank_batch, double bucket_cap_mb) {
  TempDir dir("distributed");
  const int64_t global = world * per_rank_batch;
  auto ref = test::run_ranks(
      1, [&](int) { train_seed_cnn(0, 0, global, "", dir.str() + "/single.bin", bucket_cap_mb); },
      240);
  ASSERT_TRUE(ref[0].ok()) << test::describe(ref);
  auto results = test::run_ranks(
      world,
      [&](int rank) {
        train_seed_cnn(rank, world, global, "file://" + dir.str() + "/store",
                       dir.str() + "/rank" + std::to_string(rank) + ".bin", bucket_cap_mb);
      },
      240);
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << test::describe(results);
  auto single = read_floats(dir.str() + "/single.bin");
  ASSERT_GT(single.size(), 30000u);
  // The reference moved away from every rank's own initialisation.
  for (int r = 0; r < world; ++r) {
    auto p = read_floats(dir.str() + "/rank" + std::to_string(r) + ".bin");
    ASSERT_EQ(p.size(), single.size());
    double rel = relative_difference(p, single);
    EXPECT_LT(rel, 1e-5) << "rank " << r << " of " << world;
    std::printf("rank %d of %d: max |ddp - single| / max |single| = %.3g\n", r, world, rel);
  }
  // Ranks hold bit-identical parameters (the same averaged gradients everywhere).
  auto p0 = read_floats(dir.str() + "/rank0.bin");
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(read_floats(dir.str() + "/rank" + std::to_string(r) + ".bin"), p0) << "rank " << r;
}

TEST(DistributedDataParallel, TwoRanksMatchOneProcessWithTheCombinedBatch) {
  check_equivalence(2, 8, 25);
}

TEST(DistributedDataParallel, FourRanksMatchOneProcessWithSmallBuckets) {
  // 0.05 MiB buckets split SeedCNN's gradients into several all-reduces.
  check_equivalence(4, 4, 0.05);
}

// Gradient accumulation: each step runs `micro` micro-batches, the first micro - 1 under
// no_sync(), each loss scaled by 1 / micro. world == 0: one process, no DDP, one batch of
// global_batch per step. Writes the parameters; returns nothing, checks the DDP counters.
void train_accumulating(int rank, int world, int64_t global_batch, int64_t micro,
                        const std::string& store, const std::string& out, bool via_model) {
  context::set_num_threads(1);
  dataset::config::set_seed(99);
  manual_seed(uint64_t(7 + rank));
  nn::CellPtr net = models::seed_cnn(1, 28, 10);
  auto data = synthetic_data(kSteps * global_batch);
  std::shared_ptr<nn::DistributedDataParallelImpl> ddp;
  dataset::Dataset train;
  if (world == 0) {
    micro = 1;
    train = data.shuffle().batch(global_batch, true);
  } else {
    comm::init(test::rank_options(rank, world, store));
    ddp = nn::DistributedDataParallel(net);
    net = ddp;
    train =
        dataset::DistributedSampler(data, world, rank).batch(global_batch / world / micro, true);
  }
  auto opt = nn::Momentum(net->trainable_params(), 0.05, 0.9);
  auto loss_fn = nn::SoftmaxCrossEntropyWithLogits(true);
  if (via_model) {  // Model::set_accumulation_steps does the same through no_sync()
    Model model(net, loss_fn, opt);
    model.set_accumulation_steps(micro);
    model.train(1, train);
    expect(model.global_step() == kSteps, "trained ", model.global_step(), " steps");
  }
  auto it = train.create_iterator(0);
  for (int64_t step = 0; step < kSteps && !via_model; ++step) {
    opt->zero_grad();
    for (int64_t m = 0; m < micro; ++m) {
      auto row = it.next();
      expect(row.has_value(), "data ran out at step ", step);
      auto pass = [&] {
        Tensor loss = (*loss_fn)(net->forward((*row)[0]), (*row)[1]);
        (loss * (1.0 / double(micro))).backward();
      };
      if (ddp && m + 1 < micro) {
        auto guard = ddp->no_sync();
        pass();
        expect(!ddp->require_sync(), "no_sync() did not hold");
      } else {
        pass();
      }
    }
    opt->step();
  }
  if (ddp) {
    expect(ddp->require_sync(), "the no_sync() guard did not restore synchronisation");
    const auto& st = ddp->stats();
    expect(st.steps == kSteps, "ddp synchronised ", st.steps,
           " backward passes, expected one "
           "per step (",
           kSteps, ")");
    expect(st.buckets_reduced == kSteps * int64_t(ddp->bucket_layout().size()), "buckets reduced ",
           st.buckets_reduced);
  }
  write_params(out, world == 0 ? *net : *ddp->module());
  if (world) comm::release();
}

// 2 ranks x 2 micro-batches of 4 (one under no_sync) == one process with batches of 16, with
// no_sync() by hand and through Model::set_accumulation_steps.
void check_accumulation(bool via_model) {
  TempDir dir("distributed");
  const int world = 2;
  const int64_t global = 16, micro = 2;
  auto ref = test::run_ranks(
      1,
      [&](int) {
        train_accumulating(0, 0, global, micro, "", dir.str() + "/single.bin", via_model);
      },
      240);
  ASSERT_TRUE(ref[0].ok()) << test::describe(ref);
  auto results = test::run_ranks(
      world,
      [&](int rank) {
        train_accumulating(rank, world, global, micro, "file://" + dir.str() + "/store",
                           dir.str() + "/rank" + std::to_string(rank) + ".bin", via_model);
      },
      240);
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << test::describe(results);
  auto single = read_floats(dir.str() + "/single.bin");
  for (int r = 0; r < world; ++r) {
    auto p = read_floats(dir.str() + "/rank" + std::to_string(r) + ".bin");
    ASSERT_EQ(p.size(), single.size());
    double rel = relative_difference(p, single);
    EXPECT_LT(rel, 1e-5) << "rank " << r;
    std::printf("no_sync%s, rank %d: max |ddp - single| / max |single| = %.3g\n",
                via_model ? " (Model)" : "", r, rel);
  }
}

TEST(DistributedDataParallel, NoSyncAccumulatesLikeTheCombinedBatch) { check_accumulation(false); }

TEST(DistributedDataParallel, ModelAccumulationUnderDdpMatchesOneProcess) {
  check_accumulation(true);
}

TEST(DistributedDataParallel, BroadcastsRankZeroAndKeepsTheModulesNames) {
  TempDir dir("distributed");
  auto results = test::run_ranks(2, [&](int rank) {
    comm::init(test::rank_options(rank, 2, "file://" + dir.str()));
    manual_seed(uint64_t(rank));
    auto inner = models::seed_cnn(1, 28, 10);
    auto before = inner->state_dict();  // shares storage with the cell: names only
    auto own_start = inner->named_parameters()[0].second.contiguous().to_float_vector();
    auto ddp = nn::DistributedDataParallel(inner, {.bucket_cap_mb = 0.05});
    auto names = [](const nn::StateDict& s) {
      std::vector<std::string> out;
      for (auto& [k, _] : s) out.push_back(k);
      return out;
    };
    expect(names(ddp->state_dict()) == names(before), "DDP renamed the parameters");
    // Reverse registration order: the dense layer (last registered) leads the first bucket.
    const auto& layout = ddp->bucket_layout();
    expect(layout.size() >= 3, "expected >= 3 buckets, got ", layout.size());
    expect(layout[0][0] == inner->trainable_params().size() - 1, "first bucket starts at ",
           layout[0][0]);
    // A small bucket for the first layer (produced last by backward), the rest in one.
    auto ddp2 =
        nn::DistributedDataParallel(inner, {.bucket_cap_mb = 25, .last_bucket_cap_mb = 0.01});
    const std::vector<std::vector<size_t>> expected = {{3, 2, 1}, {0}};
    expect(ddp2->bucket_layout() == expected, "unexpected layout with a small last bucket");
    auto w = inner->named_parameters()[0].second;
    auto all = comm::all_gather(w.contiguous());
    auto v0 = all.select(0, 0).to_float_vector(), v1 = all.select(0, 1).to_float_vector();
    expect(v0 == v1, "parameters differ across ranks after the broadcast");
    if (rank == 1)
      expect(own_start != v1, "rank 1 started equal to rank 0: the test proves nothing");
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

// y = a * x + b * x, with `b` left out of rank 1's loss.
class TwoScales : public nn::Cell {
 public:
  TwoScales() {
    register_parameter("a", Tensor::full({3}, 2.0));
    register_parameter("b", Tensor::full({3}, 3.0));
  }
  Tensor forward(const Tensor& x) override { return ops::mul(x, param("a")); }
  Tensor uses_b(const Tensor& x) { return ops::mul(x, param("b")); }
  std::string type_name() const override { return "TwoScales"; }
};

TEST(DistributedDataParallel, ParametersWithoutGradientOnSomeRanksAreAveragedWithZeros) {
  TempDir dir("distributed");
  auto results = test::run_ranks(2, [&](int rank) {
    comm::init(test::rank_options(rank, 2, "file://" + dir.str()));
    auto inner = std::make_shared<TwoScales>();
    auto ddp = nn::DistributedDataParallel(inner);
    Tensor x = Tensor::full({3}, double(rank + 1));  // rank 0: 1, rank 1: 2
    Tensor loss = ops::sum(ddp->forward(x));
    if (rank == 0) loss = ops::add(loss, ops::sum(inner->uses_b(x)));
    loss.backward();
    auto ga = inner->named_parameters()[0].second.grad().to_float_vector();
    auto gb = inner->named_parameters()[1].second.grad().to_float_vector();
    expect(ga == std::vector<float>(3, 1.5f), "grad a ", ga[0]);  // (1 + 2) / 2
    expect(gb == std::vector<float>(3, 0.5f), "grad b ", gb[0]);  // (1 + 0) / 2
    // Twice in a row, with zero_grad between: same answer (bucket state resets).
    for (auto& p : ddp->trainable_params()) p.zero_grad();
    Tensor again = ops::sum(ddp->forward(x));
    again.backward();
    expect(inner->named_parameters()[0].second.grad().to_float_vector()[0] == 1.5f, "2nd step");
    expect(ddp->stats().steps == 2, "steps ", ddp->stats().steps);
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(DistributedDataParallel, EvalMetricsAreReducedOverUnevenShards) {
  TempDir dir("distributed");
  // 10 samples over 3 ranks (4, 3, 3): the reduced accuracy and loss equal one process's.
  auto results = test::run_ranks(3, [&](int rank) {
    context::set_num_threads(1);
    manual_seed(3);
    auto net = models::seed_cnn(1, 28, 10);
    auto data = synthetic_data(10);
    Model single(net, nn::SoftmaxCrossEntropyWithLogits(true), nullptr,
                 {{"Accuracy", metrics::Accuracy()}});
    auto expected = single.eval(data.batch(4));
    comm::init(test::rank_options(rank, 3, "file://" + dir.str()));
    auto ddp = nn::DistributedDataParallel(net);
    Model model(ddp, nn::SoftmaxCrossEntropyWithLogits(true), nullptr,
                {{"Accuracy", metrics::Accuracy()}});
    auto shard =
        dataset::DistributedSampler(data, 3, rank, {.shuffle = false, .remainder = "none"});
    auto got = model.eval(shard.batch(2));
    for (const auto& [k, v] : expected)
      expect(std::fabs(got.at(k) - v) < 1e-6 * std::max(1.0, std::fabs(v)), k, ": ", got.at(k),
             " vs ", v);
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(DistributedDataParallel, KilledRankStopsTheOthersWithAClearErrorWithinTheTimeout) {
  TempDir dir("distributed");
  const auto timeout = std::chrono::seconds(4);
  auto results = test::run_ranks(
      3,
      [&](int rank) {
        context::set_num_threads(1);
        comm::init(test::rank_options(rank, 3, "file://" + dir.str(), timeout));
        auto ddp = nn::DistributedDataParallel(models::seed_cnn(1, 28, 10));
        auto opt = nn::Momentum(ddp->trainable_params(), 0.01, 0.9);
        Model model(ddp, nn::SoftmaxCrossEntropyWithLogits(true), opt);
        struct KillAt : callbacks::Callback {
          int rank;
          explicit KillAt(int r) : rank(r) {}
          void on_train_step_end(callbacks::RunContext& ctx) override {
            if (rank == 1 && ctx.step == 3) raise(SIGKILL);
          }
        };
        auto data = dataset::DistributedSampler(synthetic_data(3 * 4 * 40), 3, rank).batch(4, true);
        std::chrono::steady_clock::time_point died_around = std::chrono::steady_clock::now();
        try {
          model.train(1, data, {std::make_shared<KillAt>(rank)});
          expect(false, "training finished with rank 1 dead");
        } catch (const Error& e) {
          std::string msg = e.what();
          double took =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - died_around).count();
          expect(contains(msg, "[communication]"), msg);
          expect(contains(msg, "timed out after 4 s") || contains(msg, "lost ("), msg);
          expect(model.global_step() <= 4, "kept training to step ", model.global_step());
          std::fprintf(stderr, "rank %d stopped after %.2f s: %s\n", rank, took, msg.c_str());
          expect(took < 4.0 + 20.0, "took ", took, " s");
        }
      },
      120);
  EXPECT_EQ(results[1].signal, SIGKILL) << test::describe(results);
  EXPECT_TRUE(results[0].ok()) << test::describe(results);
  EXPECT_TRUE(results[2].ok()) << test::describe(results);
  for (const auto& r : results) EXPECT_FALSE(r.hung) << test::describe(results);
}

TEST(DistributedDataParallel, BadUseGivesClearErrors) {
  ASSERT_FALSE(comm::is_initialized());
  EXPECT_TRUE(throws_with([] { nn::DistributedDataParallel(nn::ReLU()); },
                          "communication is not initialized"));
  // Inside a rank process gtest assertions do not count: throw what throws_with found.
  auto check = [](const ::testing::AssertionResult& r) { expect(bool(r), r.message()); };
  TempDir dir("distributed");
  auto results = test::run_ranks(1, [&](int rank) {
    comm::init(test::rank_options(rank, 1, "file://" + dir.str()));
    check(throws_with([] { nn::DistributedDataParallel(nullptr); }, "module is null"));
    check(throws_with([] { nn::DistributedDataParallel(nn::ReLU()); }, "no trainable parameters"));
    check(throws_with([] { nn::DistributedDataParallel(nn::Dense(2, 2), {.bucket_cap_mb = 0}); },
                      "bucket_cap_mb and last_bucket_cap_mb must be positive"));
    comm::release();
  });
  EXPECT_TRUE(results[0].ok()) << test::describe(results);
}

}  // namespace
}  // namespace zenith
