// Tensor parallelism on a tiny LLaMA: one decoder block and the whole model at degree 2 against
// the same model in one process (outputs and every gradient, sharded against sliced), 20 SGD
// and 20 AdamW steps with gradient clipping, the global gradient norm, and the config errors.
// Each rank computes the one-process reference itself (the same seed), so the comparison needs
// no files; ranks are forked processes (rank_runner.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "distributed/mesh.h"
#include "distributed/parallelize_llama.h"
#include "models/llama_layers.h"
#include "rank_runner.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "tiny_llama.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using distributed::TensorParallelPlan;
using test::expect;
using test::tiny_llama_config;
using zenith::testing::TempDir;

// max |a - b| / max |b|
double relative(const Tensor& a, const Tensor& b) {
  auto x = a.contiguous().to_float_vector(), y = b.contiguous().to_float_vector();
  expect(x.size() == y.size(), "sizes differ: ", x.size(), " vs ", y.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, double(std::fabs(x[i] - y[i])));
    scale = std::max(scale, double(std::fabs(y[i])));
  }
  return diff / scale;
}

// The reference model and a copy of it (own storage) for the tensor-parallel side.
std::shared_ptr<models::Llama> copy_of(const models::Llama& ref) {
  std::map<std::string, Tensor> weights;
  for (auto& [name, t] : ref.hf_state()) weights.emplace(name, t.clone());
  return std::make_shared<models::Llama>(ref.config(), std::move(weights), "reference");
}

models::LlamaInput input_of(const Tensor& ids) {
  models::LlamaInput input;
  input.input_ids = ids;
  return input;
}

Tensor tokens(int64_t vocab, uint64_t seed) {
  manual_seed(seed);
  return Tensor::randint(0, vocab, {2, 8});
}

void in_ranks(const std::function<void(int)>& fn, int n = 2) {
  TempDir dir("tensor_parallel");
  const std::string store = "file://" + dir.str();
  auto results = test::run_ranks(n, [&](int rank) {
    context::set_num_threads(1);
    comm::init(test::rank_options(rank, n, store));
    fn(rank);
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

// Every parameter's gradient on this rank against the reference's, sliced as the plan shards.
void expect_grads(const models::Llama& ref, const models::Llama& tp, const TensorParallelPlan& plan,
                  double tolerance) {
  std::map<std::string, Tensor> full;
  for (auto& [name, p] : ref.named_parameters()) full.emplace(name, p);
  int checked = 0;
  for (auto& [name, p] : tp.named_parameters()) {
    expect(full.count(name), "no reference parameter ", name);
    expect(p.grad().defined(), name, " has no gradient");
    const double err = relative(p.grad(), plan.shard_of(name, full.at(name).grad()));
    expect(err < tolerance, name, " gradient differs by ", err, " (relative)");
    ++checked;
  }
  expect(checked == int(full.size()), "checked ", checked, " of ", full.size(), " parameters");
}

TEST(TensorParallel, DecoderBlockMatchesOneProcess) {
  in_ranks([](int rank) {
    manual_seed(11);
    models::Llama ref(tiny_llama_config(false));
    auto tp_model = copy_of(ref);
    auto plan = distributed::parallelize_llama(*tp_model, {});
    auto block = [](models::Llama& m) {
      for (auto& [name, c] : m.named_children())
        if (name == "model")
          return std::dynamic_pointer_cast<models::detail::DecoderCell>(c)->layers[0];
      throw std::runtime_error("no decoder");
    };
    models::detail::LayerContext ctx;
    std::tie(ctx.cos, ctx.sin) =
        ops::rope_cos_sin(ops::rope_inv_freq(8, {}), Tensor::arange(8).view({1, 8}));
    manual_seed(3);
    Tensor x = Tensor::randn({2, 8, 32}), weight = Tensor::randn({2, 8, 32});
    Tensor x_ref = x.clone().requires_grad_(), x_tp = x.clone().requires_grad_();
    Tensor out_ref = block(ref)->forward(x_ref, ctx);
    Tensor out_tp = block(*tp_model)->forward(x_tp, ctx);
    expect(relative(out_tp, out_ref) < 1e-5, "block output differs by ", relative(out_tp, out_ref));
    ops::sum(ops::mul(out_ref, weight)).backward();
    ops::sum(ops::mul(out_tp, weight)).backward();
    expect(relative(x_tp.grad(), x_ref.grad()) < 1e-5, "input gradient differs");
    std::map<std::string, Tensor> full;
    for (auto& [name, p] : block(ref)->named_parameters()) full.emplace(name, p);
    const std::string prefix = "model.layers.0.";
    for (auto& [name, p] : block(*tp_model)->named_parameters()) {
      const double err = relative(p.grad(), plan.shard_of(prefix + name, full.at(name).grad()));
      expect(err < 1e-5, name, " gradient differs by ", err);
    }
    expect(block(*tp_model)->self_attn->q_proj->out_features() == 16, "rank ", rank,
           " holds 2 of 4 query heads");
  });
}

TEST(TensorParallel, WholeModelOutputsAndGradientsMatchOneProcess) {
  for (bool tied : {false, true}) {
    in_ranks([tied](int rank) {
      manual_seed(12);
      models::Llama ref(tiny_llama_config(tied));
      auto tp_model = copy_of(ref);
      auto plan = distributed::parallelize_llama(*tp_model, {});
      Tensor ids = tokens(64, 5);
      models::LlamaInput input = input_of(ids);
      Tensor logits_ref = ref.forward(ids);
      Tensor loss_ref = models::causal_lm_loss(logits_ref, ids);
      Tensor loss_tp = distributed::tensor_parallel_lm_loss(*tp_model, plan, input, ids);
      expect(std::fabs(loss_tp.item() - loss_ref.item()) < 1e-5 * std::fabs(loss_ref.item()),
             "loss ", loss_tp.item(), " vs ", loss_ref.item());
      {
        NoGradGuard no_grad;
        Tensor local = tp_model->forward(ids);  // this rank's vocabulary columns only
        expect(local.shape() == Shape{2, 8, 32}, "local logits ", shape_str(local.shape()));
        expect(relative(local, logits_ref.slice(2, rank * 32, rank * 32 + 32)) < 1e-5,
               "local logits differ");
      }
      loss_ref.backward();
      loss_tp.backward();
      expect_grads(ref, *tp_model, plan, 1e-5);
      // Model state per rank: everything but the norm weights is split.
      const double share = double(tp_model->num_parameters()) / double(ref.num_parameters());
      expect(share < 0.52, "rank ", rank, " holds ", share, " of the parameters");
      const double norm_ref = nn::clip_grad_norm(ref.parameters(), 1e9);
      const double norm_tp = plan.clip_grad_norm(*tp_model, 0);
      expect(std::fabs(norm_tp - norm_ref) < 1e-5 * norm_ref, "gradient norm ", norm_tp, " vs ",
             norm_ref);
    });
  }
}

// 20 steps of `make_opt` on both, with clipping at `clip` (0: none); parameters within `tol`.
void train_both(const std::function<nn::OptimizerPtr(std::vector<Tensor>)>& make_opt, double clip,
                double tol) {
  in_ranks([&](int) {
    manual_seed(13);
    models::Llama ref(tiny_llama_config(true));
    auto tp_model = copy_of(ref);
    auto plan = distributed::parallelize_llama(*tp_model, {});
    auto opt_ref = make_opt(ref.trainable_params());
    auto opt_tp = make_opt(tp_model->trainable_params());
    for (int step = 0; step < 20; ++step) {
      Tensor ids = tokens(64, 100 + uint64_t(step));
      models::causal_lm_loss(ref.forward(ids), ids).backward();
      distributed::tensor_parallel_lm_loss(*tp_model, plan, input_of(ids), ids).backward();
      const double n_ref = nn::clip_grad_norm(ref.parameters(), clip > 0 ? clip : 1e9);
      const double n_tp = plan.clip_grad_norm(*tp_model, clip);
      expect(std::fabs(n_tp - n_ref) < 1e-4 * n_ref, "step ", step, ": norm ", n_tp, " vs ", n_ref);
      opt_ref->step();
      opt_tp->step();
      opt_ref->zero_grad();
      opt_tp->zero_grad();
    }
    std::map<std::string, Tensor> full;
    for (auto& [name, p] : ref.named_parameters()) full.emplace(name, p);
    for (auto& [name, p] : tp_model->named_parameters()) {
      const double err = relative(p, plan.shard_of(name, full.at(name)));
      expect(err < tol, name, " differs by ", err, " after 20 steps");
    }
    // The whole model gathered back, as finetune would save it at the end.
    auto gathered = distributed::tensor_parallel_full_state(*tp_model, plan);
    const auto want = ref.hf_state();
    expect(gathered.size() == want.size(), gathered.size(), " tensors gathered");
    for (auto& [name, t] : want) {
      expect(gathered.at(name).shape() == t.shape(), name, " gathered as ",
             shape_str(gathered.at(name).shape()));
      expect(relative(gathered.at(name), t) < tol, name, " gathered differs");
    }
  });
}

TEST(TensorParallel, TwentySgdStepsMatchOneProcess) {
  train_both([](std::vector<Tensor> p) { return nn::SGD(std::move(p), 0.1); }, 0, 1e-5);
}

TEST(TensorParallel, TwentyAdamWStepsWithClippingMatchOneProcess) {
  train_both([](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-2); }, 0.5, 1e-4);
}

// Activation checkpointing on a tensor-parallel model: the recompute in backward runs the
// layer's collectives again, in the same order on every rank.
TEST(TensorParallel, ActivationCheckpointingMatchesOneProcess) {
  for (const char* policy : {"full", "selective"}) {
    for (bool sequence_parallel : {false, true}) {
      in_ranks([&](int) {
        manual_seed(17);
        models::Llama ref(tiny_llama_config(false));
        auto tp_model = copy_of(ref);
        distributed::TensorParallelGroup tp;
        tp.sequence_parallel = sequence_parallel;
        auto plan = distributed::parallelize_llama(*tp_model, tp);
        tp_model->set_activation_checkpointing(true, policy);
        Tensor ids = tokens(64, 8);
        models::causal_lm_loss(ref.forward(ids), ids).backward();
        distributed::tensor_parallel_lm_loss(*tp_model, plan, input_of(ids), ids).backward();
        plan.sync_gradients(*tp_model);
        expect_grads(ref, *tp_model, plan, 1e-5);
      });
    }
  }
}

// Bytes allocated by a forward pass and still alive at its end: what it keeps for backward.
template <typename F>
int64_t kept_bytes(F forward_pass, Tensor& loss) {
  const int64_t before = int64_t(core::allocator_stats().live_bytes);
  loss = forward_pass();
  return int64_t(core::allocator_stats().live_bytes) - before;
}

TEST(TensorParallel, SequenceParallelMatchesOneProcessAndKeepsLessActivation) {
  in_ranks([](int) {
    manual_seed(14);
    models::Llama ref(tiny_llama_config(false));
    auto tp_model = copy_of(ref), sp_model = copy_of(ref);
    auto tp_plan = distributed::parallelize_llama(*tp_model, {});
    auto sp_plan = distributed::parallelize_llama(*sp_model, {.sequence_parallel = true});
    manual_seed(6);
    Tensor ids = Tensor::randint(0, 64, {2, 32});
    models::LlamaInput input = input_of(ids);
    Tensor loss_ref = models::causal_lm_loss(ref.forward(ids), ids), loss_tp, loss_sp;
    const int64_t tp_bytes = kept_bytes(
        [&] { return distributed::tensor_parallel_lm_loss(*tp_model, tp_plan, input, ids); },
        loss_tp);
    const int64_t sp_bytes = kept_bytes(
        [&] { return distributed::tensor_parallel_lm_loss(*sp_model, sp_plan, input, ids); },
        loss_sp);
    expect(std::fabs(loss_sp.item() - loss_ref.item()) < 1e-5 * loss_ref.item(), "loss ",
           loss_sp.item(), " vs ", loss_ref.item());
    expect(sp_bytes < tp_bytes, "sequence parallel keeps ", sp_bytes, " bytes, plain ", tp_bytes);
    std::printf(
        "activations kept by the forward pass: tensor parallel %lld bytes, + sequence "
        "parallel %lld bytes\n",
        static_cast<long long>(tp_bytes), static_cast<long long>(sp_bytes));
    std::fflush(stdout);  // the rank exits with _exit
    loss_ref.backward();
    loss_tp.backward();
    loss_sp.backward();
    sp_plan.sync_gradients(*sp_model);
    expect_grads(ref, *sp_model, sp_plan, 1e-5);
    const double norm_ref = nn::clip_grad_norm(ref.parameters(), 1e9);
    const double norm_sp = sp_plan.clip_grad_norm(*sp_model, 0);
    expect(std::fabs(norm_sp - norm_ref) < 1e-5 * norm_ref, "gradient norm ", norm_sp, " vs ",
           norm_ref);
  });
}

// LoRA on every linear layer of a frozen base, with B random (PEFT's zero B would leave A
// without a gradient): the adapters split with their layers; 10 AdamW steps (with sequence
// parallelism too) and the saved PEFT adapter against one process's.
TEST(TensorParallel, LoraAdaptersSplitWithTheirLayersAndSaveAsOneProcess) {
  TempDir dirs("tp_lora");
  for (bool sequence_parallel : {false, true}) {
    in_ranks([&](int rank) {
      manual_seed(15);
      models::Llama ref(tiny_llama_config(false));
      auto tp_model = copy_of(ref);
      io::LoraConfig config;
      config.r = 4;
      config.lora_alpha = 8;
      config.target_modules = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                               "gate_proj", "up_proj", "down_proj"};
      models::add_lora(ref, config);
      io::LoraAdapter start = models::lora_adapter(ref, config);
      for (auto& [path, w] : start.modules) w.B = ops::mul(Tensor::randn(w.B.shape()), 0.1);
      models::apply_lora(ref, start);
      models::apply_lora(*tp_model, start);
      ref.freeze_base();
      tp_model->freeze_base();
      auto plan =
          distributed::parallelize_llama(*tp_model, {.sequence_parallel = sequence_parallel});
      auto opt_ref = nn::AdamW(ref.trainable_params(), 1e-2);
      auto opt_tp = nn::AdamW(tp_model->trainable_params(), 1e-2);
      expect(tp_model->trainable_params().size() == ref.trainable_params().size(),
             "trainable tensors: ", tp_model->trainable_params().size());
      for (int step = 0; step < 10; ++step) {
        Tensor ids = tokens(64, 300 + uint64_t(step));
        models::causal_lm_loss(ref.forward(ids), ids).backward();
        distributed::tensor_parallel_lm_loss(*tp_model, plan, input_of(ids), ids).backward();
        plan.sync_gradients(*tp_model);
        if (step == 0) {
          std::map<std::string, Tensor> full;
          for (auto& [name, p] : ref.named_parameters()) full.emplace(name, p);
          for (auto& [name, p] : tp_model->named_parameters()) {
            if (!p.requires_grad()) continue;
            const double err = relative(p.grad(), plan.shard_of(name, full.at(name).grad()));
            expect(err < 1e-5, name, " gradient differs by ", err);
          }
        }
        const double n_ref = nn::clip_grad_norm(ref.trainable_params(), 1e9);
        const double n_tp = plan.clip_grad_norm(*tp_model, 0);
        expect(std::fabs(n_tp - n_ref) < 1e-5 * n_ref, "norm ", n_tp, " vs ", n_ref);
        opt_ref->step();
        opt_tp->step();
        opt_ref->zero_grad();
        opt_tp->zero_grad();
      }
      io::LoraAdapter saved = distributed::tensor_parallel_lora_adapter(*tp_model, plan, config);
      io::LoraAdapter want = models::lora_adapter(ref, config);
      expect(saved.modules.size() == want.modules.size(), "modules ", saved.modules.size());
      for (auto& [path, w] : want.modules) {
        const auto& got = saved.modules.at(path);
        expect(relative(got.A, w.A) < 1e-4 && relative(got.B, w.B) < 1e-4, path,
               " adapter differs: A ", relative(got.A, w.A), " B ", relative(got.B, w.B));
      }
      if (rank == 0)
        io::save_lora_adapter(dirs / ("tp" + std::to_string(sequence_parallel)), saved);
    });
    io::LoraAdapter loaded =
        io::load_lora_adapter(dirs / ("tp" + std::to_string(sequence_parallel)));
    EXPECT_EQ(loaded.modules.size(), 14u);  // 7 linear layers x 2 decoder layers
    EXPECT_EQ(loaded.modules.at("model.layers.1.self_attn.o_proj").A.shape(), (Shape{4, 32}));
    EXPECT_EQ(loaded.modules.at("model.layers.1.mlp.gate_proj").B.shape(), (Shape{48, 4}));
  }
}

// Data 2 x tensor 2 over four ranks: DistributedDataParallel over the mesh's data group on a
// tensor-parallel model, each data rank on half the batch; 20 AdamW steps as one process on the
// whole batch.
TEST(TensorParallel, WithDataParallelMatchesOneProcess) {
  in_ranks(
      [](int) {
        manual_seed(16);
        models::Llama ref(tiny_llama_config(false));
        auto tp_model = copy_of(ref);
        auto mesh = distributed::DeviceMesh::create({.tensor = 2});
        expect(mesh.degree(distributed::MeshDim::data) == 2, "data degree ",
               mesh.degree(distributed::MeshDim::data));
        auto plan = distributed::parallelize_llama(*tp_model, {.group = mesh.tensor_group()});
        auto ddp = nn::DistributedDataParallel(tp_model, {.group = mesh.data_group()});
        auto opt_ref = nn::AdamW(ref.trainable_params(), 1e-2);
        auto opt_tp = nn::AdamW(tp_model->trainable_params(), 1e-2);
        const int64_t half = mesh.data_rank() * 2;
        for (int step = 0; step < 20; ++step) {
          manual_seed(400 + uint64_t(step));
          Tensor ids = Tensor::randint(0, 64, {4, 8});
          Tensor mine = ids.slice(0, half, half + 2).contiguous();
          models::causal_lm_loss(ref.forward(ids), ids).backward();
          distributed::tensor_parallel_lm_loss(*tp_model, plan, input_of(mine), mine).backward();
          plan.sync_gradients(*tp_model);
          const double n_ref = nn::clip_grad_norm(ref.parameters(), 1.0);
          const double n_tp = plan.clip_grad_norm(*tp_model, 1.0);
          expect(std::fabs(n_tp - n_ref) < 1e-4 * n_ref, "step ", step, ": norm ", n_tp, " vs ",
                 n_ref);
          opt_ref->step();
          opt_tp->step();
          opt_ref->zero_grad();
          opt_tp->zero_grad();
        }
        expect(ddp->stats().steps == 20, "ddp synchronised ", ddp->stats().steps, " steps");
        std::map<std::string, Tensor> full;
        for (auto& [name, p] : ref.named_parameters()) full.emplace(name, p);
        for (auto& [name, p] : tp_model->named_parameters()) {
          const double err = relative(p, plan.shard_of(name, full.at(name)));
          expect(err < 1e-4, name, " differs by ", err, " after 20 steps");
        }
      },
      4);
}

TEST(TensorParallel, DegreeMustDivideHeadsAndSizes) {
  models::LlamaConfig c = tiny_llama_config(false);
  c.num_attention_heads = 6;
  c.num_key_value_heads = 3;
  c.head_dim = 4;
  c.vocab_size = 96;
  EXPECT_NO_THROW(distributed::check_tensor_parallel(c, 3));
  EXPECT_TRUE(zenith::testing::throws_with(
      [&] { distributed::check_tensor_parallel(c, 4); },
      "num_attention_heads 6 does not divide by the tensor-parallel degree 4"));
  c.num_attention_heads = 8;
  EXPECT_TRUE(zenith::testing::throws_with(
      [&] { distributed::check_tensor_parallel(c, 2); },
      "num_key_value_heads 3 does not divide by the tensor-parallel degree 2"));
}

}  // namespace
}  // namespace zenith
