// Graph mode on models::Llama: a tiny LLaMA's training step (embedding, rms_norm, linear, rotary,
// fused attention, swiglu, cross entropy, backward, AdamW) captured once and replayed; 20 steps
// equal eager, with float32 weights and with a frozen bf16 base under LoRA; a checkpoint
// written in one mode resumes in the other.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>

#include "graph/passes/passes.h"
#include "graph_test_util.h"
#include "zenith/graph.h"
#include "zenith/llama.h"

namespace zenith::graph {
namespace {

models::LlamaConfig tiny_config(bool tied = false) {
  models::LlamaConfig c;
  c.tie_word_embeddings = tied;
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
  // checkpointing: a policy of Llama::set_activation_checkpointing, or empty for none; tied:
  // one weight for the embedding and the output layer (stories15M's shape).
  explicit LlamaTrainer(bool lora_bf16 = false, const std::string& checkpointing = "",
                        bool tied = false) {
    manual_seed(0);
    model =
        std::make_shared<models::Llama>(tiny_config(tied), lora_bf16 ? DType::bf16 : DType::f32);
    if (lora_bf16) {
      io::LoraConfig lc;
      lc.r = 4;
      lc.lora_alpha = 8;
      lc.lora_dropout = 0;
      lc.target_modules = {"q_proj", "v_proj", "down_proj"};
      models::add_lora(*model, lc);
      model->freeze_base();
    }
    if (!checkpointing.empty()) model->set_activation_checkpointing(true, checkpointing);
    model->train();
    opt = nn::AdamW(model->trainable_params(), nn::warmup_cosine_lr(3e-3, 3, 20, 1e-4), 0.9, 0.999,
                    1e-8, 0.01);
    for (auto& p : model->named_parameters()) state.push_back(p);
    for (auto& [k, v] : opt->state_dict()) state.push_back({"optimizer." + k, v});
  }
  // One step, eager (c null) or through the compiler; the loss read between phases.
  double step(StepCompiler* c, const Tensor& ids, const Tensor& labels) {
    return test::train_step(c, {ids, labels}, *opt,
                            [&] { return models::causal_lm_loss(model->forward(ids), labels); });
  }
};

using test::max_param_diff;

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

// Returns the capture line.
std::string expect_equal_training(bool lora_bf16, int steps, const std::string& checkpointing = "",
                                  bool in_backward = false, bool tied = false) {
  LlamaTrainer eager(lora_bf16, "", tied), graphed(lora_bf16, checkpointing, tied);
  std::vector<std::string> log;
  StepCompiler c(
      graphed.state, graphed.opt.get(),
      {.update_in_backward = in_backward, .log = [&](const std::string& l) { log.push_back(l); }});
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
  EXPECT_EQ(log.size(), 1u);
  if (log.empty()) return "";
  EXPECT_EQ(log[0].rfind("graph: ", 0), 0u) << log[0];
  if (tied) EXPECT_NE(log[0].find("embedding grad+add 1"), std::string::npos) << log[0];
  std::cout << (lora_bf16 ? "llama lora bf16: " : "llama f32: ") << log[0] << "\n";
  return log[0];
}

// The transformer patterns in a captured LLaMA step, before and after the passes. RMSNorm, RoPE,
// SwiGLU and attention (scale, causal and padding mask, softmax: one fused kernel) reach the
// graph as one op each, forward and backward, so the passes leave them as they are; residual
// adds fuse with the RMSNorm after them (and, backward, the norm's dx with the residual stream's
// gradient sum); other gradient sums join elementwise loops; the AdamW updates become one. One
// replay of the optimized graph equals an eager step.
TEST_F(LlamaGraph, TransformerPatternsBeforeAndAfterThePasses) {
  LlamaTrainer eager, graphed;
  manual_seed(1);
  auto [ids, labels] = batch(2, 12);
  const double eager_loss = eager.step(nullptr, ids, labels);
  std::optional<Graph> g = test::record_step({ids, labels}, graphed.state, *graphed.opt, [&] {
    return models::causal_lm_loss(graphed.model->forward(ids), labels);
  });
  ASSERT_TRUE(g.has_value());
  if (std::getenv("ZENITH_GRAPH_TEST_DUMP")) std::cout << g->dump();
  const int layers = 2, params = int(graphed.model->trainable_params().size());
  std::map<std::string, int> before = g->op_counts();
  const std::map<std::string, int> patterns = {{"rms_norm", 2 * layers + 1},
                                               {"rms_norm_backward", 2 * layers + 1},
                                               {"rotary_embedding", 2 * layers},
                                               {"rotary_embedding_backward", 2 * layers},
                                               {"attention", layers},
                                               {"attention_backward", layers},
                                               {"swiglu", layers},
                                               {"swiglu_backward", layers}};
  for (const auto& [op, n] : patterns) EXPECT_EQ(before[op], n) << op;
  EXPECT_EQ(before["adam_update"], params);
  Graph unfused_head = *g, in_backward = *g;
  PassReport report = optimize(*g);
  if (std::getenv("ZENITH_GRAPH_TEST_DUMP")) std::cout << "after:\n" << g->dump();
  std::map<std::string, int> after = g->op_counts();
  // Every norm after a residual add fuses with it (all but the first, which reads the
  // embedding); backward, every norm's dx but one joins the residual stream's gradient sum.
  for (const auto& [op, n] : patterns) {
    if (op != "rms_norm" && op != "rms_norm_backward") {
      EXPECT_EQ(after[op], n) << op;
    }
  }
  EXPECT_EQ(after["add_rms_norm"], 2 * layers);
  EXPECT_EQ(after["rms_norm"], 1);
  EXPECT_EQ(after["rms_norm_add_backward"], 2 * layers);
  EXPECT_EQ(after["rms_norm_backward"], 1);
  EXPECT_EQ(report.fusions["add+rmsnorm"], 2 * layers);
  EXPECT_EQ(report.fusions["rmsnorm backward+add"], 2 * layers);
  EXPECT_EQ(after["adam_update"], 0);
  EXPECT_EQ(after["multi_adam_update"], 1);
  EXPECT_LT(after["add"], before["add"]);
  EXPECT_EQ(report.ops_after, int(g->nodes.size()));
  EXPECT_LT(report.ops_after, report.ops_before);
  // The output layer, its loss, the loss's backward and the head's two gradient matmuls are one
  // op; two matmuls per linear layer stay (7 per block), the input gradients of q/k/v and of
  // gate/up summed by the matmuls themselves (3 per block: dx_q + dx_k, + dx_v, dx_gate +
  // dx_up), with no add left between them.
  EXPECT_EQ(report.fusions["linear+cross-entropy"], 1);
  EXPECT_EQ(report.fusions["output layer gradients"], 1);
  EXPECT_EQ(after["linear_cross_entropy_grads"], 1);
  EXPECT_EQ(after["linear_cross_entropy"], 0);
  EXPECT_EQ(after["cross_entropy_rows"], 0);
  EXPECT_EQ(after["cross_entropy_rows_backward"], 0);
  EXPECT_EQ(after["linear"], before["linear"] - 1);
  EXPECT_EQ(before["matmul"], 2 * (7 * layers + 1));
  EXPECT_EQ(report.fusions["matmul+add"], 3 * layers);
  EXPECT_EQ(after["matmul_add"], 3 * layers);
  EXPECT_EQ(after["matmul"] + after["matmul_add"], 2 * 7 * layers);
  EXPECT_EQ(after["fused_elementwise"], 0);
  EXPECT_GT(report.overwrites, 0);  // gradient sums over a dying term
  // RoPE's backward writes dq and dk as the q and k projections' gradients want them ([B, T, H,
  // D]) and attention's backward writes dv in v's layout: no copy of either is left.
  EXPECT_EQ(report.fusions["rope+transpose"], 2 * layers);
  for (const Node& n : g->nodes) {
    if (n.op != OpId::copy) continue;
    const int from = g->values[size_t(n.inputs[0].value)].producer;
    if (from < 0) continue;
    const OpId src = g->nodes[size_t(from)].op;
    EXPECT_TRUE(src != OpId::rotary_embedding_backward && src != OpId::attention_backward &&
                src != OpId::rotary_embedding)
        << "a copy of " << op_name(src) << "'s result is left";
  }
  // Without that fusion, dlogits are written over the logits, which die at cross-entropy's
  // backward.
  PassReport unfused = optimize(unfused_head, {.linear_cross_entropy = false});
  EXPECT_EQ(unfused.fusions.count("linear+cross-entropy"), 0u);
  EXPECT_EQ(unfused.ops_after, report.ops_after + 4);
  int over_logits = 0;
  for (const Node& n : unfused_head.nodes)
    if (n.op == OpId::cross_entropy_rows_backward) over_logits += n.overwrites == 1;
  EXPECT_EQ(over_logits, 1);

  // With the updates in the backward, each runs after every read of its parameter: the q/k/v
  // and gate/up weights are read by their matmul_add, after their own gradient is made.
  optimize(in_backward, {.update_in_backward = true});
  int updates = 0;
  for (size_t i = 0; i < in_backward.nodes.size(); ++i) {
    const Node& u = in_backward.nodes[i];
    if (u.op != OpId::multi_adam_update) continue;
    const int64_t count = u.get<OpId::multi_adam_update>().count;
    for (int64_t k = 0; k < count; ++k, ++updates)
      for (size_t j = i + 1; j < in_backward.nodes.size(); ++j)
        for (const Operand& in : in_backward.nodes[j].inputs)
          EXPECT_NE(in.value, u.inputs[size_t(k)].value)
              << "node " << j << " reads a parameter updated at node " << i;
  }
  EXPECT_EQ(updates, params);

  // The optimized graph replayed from the start weights: the eager step's loss and weights.
  LlamaTrainer replayed;
  test::State state = replayed.state;
  for (size_t i = 0; i < state.size(); ++i)  // rebind the graph's state to the fresh trainer
    for (Value& v : g->values)
      if (v.kind == ValueKind::kState && v.name == state[i].first) v.tensor = state[i].second;
  Program p(*g);
  p.bind_inputs({ids, labels});
  p.set_update_params({.lr = replayed.opt->current_lr(), .step = 1});
  const double replay_loss = p.run_segment(0)[0].item();
  p.run_segment(1);
  p.run_segment(2);
  p.finish();
  EXPECT_NEAR(replay_loss, eager_loss, 1e-6);
  EXPECT_LE(max_param_diff(*eager.model, *replayed.model), 1e-6);
}

TEST_F(LlamaGraph, TwentyStepsEqualEager) {
  EXPECT_NE(expect_equal_training(false, 20).find("linear+cross-entropy 1"), std::string::npos);
}

// A head tied to the embedding (stories15M's): the fused head reads the embedding's weight,
// whose gradient (the head's dW plus the embedding's rows) fuses too; with the updates in the
// backward as well.
TEST_F(LlamaGraph, TiedHeadTwentyStepsEqualEager) {
  for (bool in_backward : {false, true}) {
    const std::string line = expect_equal_training(false, 20, "", in_backward, true);
    EXPECT_NE(line.find("linear+cross-entropy 1"), std::string::npos) << line;
    EXPECT_NE(line.find("embedding grad+add 1"), std::string::npos) << line;
  }
}

// The same with the output layer and its loss left unfused (ZENITH_GRAPH_LINEAR_CROSS_ENTROPY=0).
TEST_F(LlamaGraph, TwentyStepsEqualEagerWithoutTheFusedHead) {
  ::setenv("ZENITH_GRAPH_LINEAR_CROSS_ENTROPY", "0", 1);
  const std::string line = expect_equal_training(false, 20);
  ::unsetenv("ZENITH_GRAPH_LINEAR_CROSS_ENTROPY");
  EXPECT_EQ(line.find("linear+cross-entropy"), std::string::npos) << line;
}

TEST_F(LlamaGraph, LoraOnABf16BaseEqualsEager) { expect_equal_training(true, 20); }

// Checkpointed layers (the recompute in backward, and selective's kept outputs taken back
// instead of run again) capture and replay too, equal to eager without checkpointing.
TEST_F(LlamaGraph, CheckpointedLayersEqualEager) {
  for (const char* policy : {"selective", "full"})
    for (bool lora_bf16 : {false, true}) {
      SCOPED_TRACE(std::string(policy) + (lora_bf16 ? " lora bf16" : " f32"));
      expect_equal_training(lora_bf16, 5, policy);
    }
}

// AdamW in the backward (graph::Options::update_in_backward): the same training.
TEST_F(LlamaGraph, UpdatesInTheBackwardEqualEager) { expect_equal_training(false, 20, "", true); }

// Updates placed in the backward only where that lowers the peak: each one placed early would
// raise it if moved after the backward. At stories15M's shape (V 32000, D 288, 6 layers, seq 64
// x batch 2) the peak is the output layer's (its exps, 16 MB, before any layer's gradient
// exists), so every update stays after the backward, as one AdamW over all parameters.
TEST_F(LlamaGraph, UpdatesGoInTheBackwardOnlyWhereTheyLowerThePeak) {
  for (bool stories : {false, true}) {
    SCOPED_TRACE(stories ? "stories15M" : "tiny");
    models::LlamaConfig c = tiny_config(true);
    int64_t batch_size = 2, seq = 12;
    if (stories) {
      c.vocab_size = 32000;
      c.hidden_size = 288;
      c.intermediate_size = 768;
      c.num_hidden_layers = 6;
      c.num_attention_heads = 6;
      c.num_key_value_heads = 6;
      c.head_dim = 48;
      c.max_position_embeddings = 256;
      seq = 64;
    }
    manual_seed(0);
    auto model = std::make_shared<models::Llama>(c);
    model->train();
    auto opt = nn::AdamW(model->trainable_params(), 1e-3, 0.9, 0.999, 1e-8, 0.01);
    test::State state;
    for (auto& p : model->named_parameters()) state.push_back(p);
    for (auto& [k, v] : opt->state_dict()) state.push_back({"optimizer." + k, v});
    Tensor ids = Tensor::randint(0, c.vocab_size, {batch_size, seq});
    Tensor labels = Tensor::randint(0, c.vocab_size, {batch_size, seq});
    std::optional<Graph> g = test::record_step({ids, labels}, state, *opt, [&] {
      return models::causal_lm_loss(model->forward(ids), labels);
    });
    ASSERT_TRUE(g.has_value());
    g->grads.clear();
    PassReport r = optimize(*g, {.update_in_backward = true});
    int early = 0, late = 0;
    test::expect_early_updates_lower_the_peak(*g, &early, &late);
    EXPECT_EQ(r.updates_in_backward, early);
    if (stories) {
      EXPECT_EQ(early, 0);
      EXPECT_EQ(late, 1);
      EXPECT_EQ(g->count(OpId::multi_adam_update), 1);
    }
  }
}

// A tied embedding: its gradient (the output layer's [V, D] weight gradient plus the token rows)
// becomes one embedding_backward_add written over the output layer's dying gradient, with the
// updates after the backward and in it.
TEST_F(LlamaGraph, TiedEmbeddingGradientIsSummedInPlace) {
  LlamaTrainer trainer(false, "", true);
  manual_seed(1);
  auto [ids, labels] = batch(2, 12);
  std::optional<Graph> g = test::record_step({ids, labels}, trainer.state, *trainer.opt, [&] {
    return models::causal_lm_loss(trainer.model->forward(ids), labels);
  });
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->count(OpId::embedding_backward), 1);
  EXPECT_EQ(g->count(OpId::embedding_backward_add), 0);
  for (bool in_backward : {false, true}) {
    Graph optimized = *g;
    optimize(optimized, {.update_in_backward = in_backward});
    EXPECT_EQ(optimized.count(OpId::embedding_backward), 0);
    int over_head = 0;
    for (const Node& n : optimized.nodes)
      if (n.op == OpId::embedding_backward_add) over_head += n.overwrites == 2;
    EXPECT_EQ(over_head, 1) << "updates in backward " << in_backward;
  }
  // 20 steps of this tied model equal eager both ways: TiedHeadTwentyStepsEqualEager.
}

}  // namespace
}  // namespace zenith::graph
