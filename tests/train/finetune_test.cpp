// The fine-tuning loop (zenith/finetune.h) on the small reference model tests/fixtures/llama/
// llama_gqa with pre-tokenized data: LoRA starts at the base, learns, merges; accumulation equals
// the combined batch; full fine-tuning writes a loadable model; bad settings are errors.
#include "zenith/finetune.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "support/finetune_fixtures.h"
#include "support/llama_fixtures.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

TEST(Finetune, LoraStartsAtTheBaseLearnsAndMergesToWhatItComputes) {
  TempDir dir("finetune_lora");
  Data train = pattern_data(16, 1), eval = pattern_data(8, 2);
  finetune::Options o = lora_options(dir.str());
  finetune::set_lora_targets(o.lora, "all-linear");
  o.max_steps = 12;
  o.batch_size = 4;
  finetune::Result r = finetune::run(o, train, &eval);
  ASSERT_EQ(r.steps, 12);
  ASSERT_EQ(r.losses.size(), 12u);

  // Step 0 (B = 0) is the base model.
  auto base = models::Llama::from_pretrained(o.model);
  const finetune::EvalRecord base_eval = finetune::evaluate(*base, eval, 4, 0);
  ASSERT_EQ(r.evals.size(), 2u);
  EXPECT_EQ(r.evals[0].step, 0);
  EXPECT_NEAR(r.evals[0].loss, base_eval.loss, 1e-6 * base_eval.loss);
  EXPECT_EQ(r.evals[0].targets, base_eval.targets);
  // It learns: training and held-out loss go down.
  EXPECT_LT(r.losses.back(), r.losses.front() * 0.8);
  EXPECT_LT(r.evals[1].loss, r.evals[0].loss * 0.95);
  // r 8 on q, k, v, o [32 <- 32, 16 <- 32, 16 <- 32, 32 <- 32], gate, up [64 <- 32], down
  // [32 <- 64], in 2 layers (all-linear leaves lm_head out).
  EXPECT_EQ(r.trainable_parameters, 2 * 8 * (64 + 48 + 48 + 64 + 96 + 96 + 96));

  // The PEFT adapter written computes what training ended with, unmerged and merged.
  auto tuned = models::Llama::from_pretrained(o.model);
  models::load_lora(*tuned, dir.str());
  const finetune::EvalRecord unmerged = finetune::evaluate(*tuned, eval, 4, 0);
  EXPECT_NEAR(unmerged.loss, r.evals[1].loss, 1e-6 * unmerged.loss);
  finetune::Batch b = finetune::collate({&eval.examples[0], &eval.examples[1]}, 0);
  models::LlamaInput input;
  input.input_ids = b.input_ids;
  input.attention_mask = b.attention_mask;
  Tensor before = tuned->forward(input);
  EXPECT_EQ(models::merge_lora(*tuned).size(), 14u);
  EXPECT_LE(scaled_error(tuned->forward(input), before, b.attention_mask), 1e-5);

  // Outputs: eval_log.json, metrics.jsonl with the scalars the dashboard plots, TensorBoard.
  nlohmann::json log = nlohmann::json::parse(std::ifstream(dir / "eval_log.json"));
  ASSERT_EQ(log.size(), 2u);
  EXPECT_DOUBLE_EQ(log[1]["eval_loss"].get<double>(), r.evals[1].loss);
  std::map<std::string, int> names;
  std::ifstream metrics(dir / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    ++names[nlohmann::json::parse(line)["name"].get<std::string>()];
  for (const char* name : {"loss", "learning_rate", "grad_norm", "tokens_per_second"})
    EXPECT_EQ(names[name], 12) << name;
  EXPECT_EQ(names["eval/loss"], 2);
  EXPECT_TRUE(std::filesystem::exists(dir / "tensorboard"));
}

// K micro-batches of B per step = one batch of K B: the loss is the mean over the step's learned
// labels either way (every micro-batch scaled by 1 / the step's targets), padding never counts.
// Losses and gradient norms agree to 1e-5 over three steps, and the adapters of 3 x 2 to 1e-5
// too (their gradients summed in float64 across micro-batches, train/finetune_ranks.h). 1 x 6 to
// 1e-3 only: measured 7.7e-5 in one tensor (gate_proj.B of layer 1), so some float32 row of a
// one-sequence batch differs from the same row in a batch of 6 (oneDNN's sgemm rounds a row by
// where it falls in the product's last block of rows: on an AVX2 host, single-threaded, a row of
// an M-row product equals the same row of a 480-row one for M = 48 or 96 but not 50 or 56);
// AdamW turns such rounding in gradients near zero into differences of up to lr per element.
TEST(Finetune, AccumulationEqualsTheCombinedBatch) {
  Data train = pattern_data(12, 3);
  const int64_t batch[3] = {6, 3, 1}, accumulate[3] = {1, 2, 6};
  std::map<std::string, Tensor> adapters[3];
  finetune::Result r[3];
  for (int i = 0; i < 3; ++i) {
    TempDir dir("finetune_accumulate");
    finetune::Options o = lora_options(dir.str());
    finetune::set_lora_targets(o.lora, "all-linear");
    o.max_steps = 3;
    o.batch_size = batch[i];
    o.accumulate_steps = accumulate[i];
    r[i] = finetune::run(o, train);
    adapters[i] = adapter_tensors(dir.str());
  }
  ASSERT_EQ(r[0].losses.size(), 3u);
  for (int i = 1; i < 3; ++i) {
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_NEAR(r[i].losses[s], r[0].losses[s], 1e-5 * r[0].losses[s])
          << "step " << s + 1 << ", batch " << batch[i] << " x " << accumulate[i];
      EXPECT_NEAR(r[i].grad_norms[s], r[0].grad_norms[s], 1e-5 * r[0].grad_norms[s])
          << "step " << s + 1 << ", batch " << batch[i] << " x " << accumulate[i];
    }
    for (const auto& [name, t] : adapters[0])
      EXPECT_LE(scaled_error(adapters[i].at(name), t), batch[i] == 1 ? 1e-3 : 1e-5)
          << name << " batch " << batch[i] << " x " << accumulate[i];
  }
}

TEST(Finetune, FullFineTuningWritesAModelDirectory) {
  TempDir dir("finetune_full");
  Data train = pattern_data(8, 4);
  finetune::Options o = lora_options(dir.str());
  o.method = finetune::parse_method("full");
  o.lr = 3e-3;
  o.max_steps = 6;
  o.batch_size = 4;
  finetune::Result r = finetune::run(o, train);
  EXPECT_LT(r.losses.back(), r.losses.front());
  EXPECT_EQ(r.trainable_parameters, r.total_parameters);
  auto tuned = models::Llama::from_pretrained(dir.str());
  auto base = models::Llama::from_pretrained(o.model);
  EXPECT_EQ(tuned->config().vocab_size, base->config().vocab_size);
  const double tuned_loss = finetune::evaluate(*tuned, train, 4, 0).loss;
  EXPECT_LT(tuned_loss, finetune::evaluate(*base, train, 4, 0).loss);
}

TEST(Finetune, RandomInitTrainsFromScratch) {
  TempDir dir("finetune_scratch");
  finetune::Options o = lora_options(dir.str());
  o.method = finetune::parse_method("full");
  o.init = finetune::parse_init("random");
  o.model_config = llama_fixture("llama_gqa") + "/config.json";
  o.model = "";
  o.lr = 3e-3;
  o.max_steps = 8;
  o.batch_size = 4;
  Data train = pattern_data(8, 10);
  finetune::Result r = finetune::run(o, train);
  EXPECT_LT(r.losses.back(), r.losses.front());
  EXPECT_NEAR(r.losses.front(), std::log(128.0), 0.1) << "random weights: about uniform";
  auto tuned = models::Llama::from_pretrained(dir.str());
  EXPECT_NEAR(finetune::evaluate(*tuned, train, 4, 0).loss, r.losses.back(), 0.5);
  o.method = finetune::parse_method("lora");
  EXPECT_THROW(finetune::run(o, train), Error);
}

TEST(Finetune, ActivationCheckpointingGivesTheSameRun) {
  Data train = pattern_data(8, 5);
  std::vector<double> losses[3];
  for (int i = 0; i < 3; ++i) {
    TempDir dir("finetune_checkpointing");
    finetune::Options o = lora_options(dir.str());
    o.max_steps = 3;
    o.activation_checkpointing = i > 0;
    o.activation_checkpointing_policy = i == 1 ? "selective" : "full";
    losses[i] = finetune::run(o, train).losses;
  }
  for (int i = 1; i < 3; ++i)
    for (size_t s = 0; s < 3; ++s)
      EXPECT_NEAR(losses[i][s], losses[0][s], 1e-6 * losses[0][s]) << "policy " << i;
}

// Stopped at a checkpoint and resumed = never stopped, bit for bit (LoRA dropout on: the random
// state is restored; the checkpoint is mid-epoch and the run crosses an epoch boundary).
TEST(Finetune, ResumeContinuesBitForBit) {
  Data train = pattern_data(16, 7);
  TempDir whole("finetune_whole"), resumed("finetune_resumed");
  finetune::Options o = lora_options(whole.str());
  o.lora.lora_dropout = 0.1;
  o.max_steps = 7;
  o.batch_size = 4;
  o.save_every = 3;
  finetune::Result a = finetune::run(o, train);
  ASSERT_TRUE(std::filesystem::exists(whole / "checkpoint-3/trainer_state.safetensors"));
  o.out = resumed.str();
  o.resume = whole / "checkpoint-3";
  finetune::Result b = finetune::run(o, train);
  ASSERT_EQ(b.losses.size(), 4u);
  for (size_t s = 0; s < 4; ++s) EXPECT_EQ(b.losses[s], a.losses[s + 3]) << "step " << s + 4;
  auto wa = adapter_tensors(whole.str()), wb = adapter_tensors(resumed.str());
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [name, t] : wa) EXPECT_EQ(scaled_error(wb.at(name), t), 0.0) << name;

  o.lr = 2e-2;
  try {
    finetune::run(o, train);
    ADD_FAILURE() << "resumed with a changed lr";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resume"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lr: 0.02 (the checkpoint's: 0.01)"), std::string::npos)
        << e.what();
  }
}

// --mode graph: each step (forward, loss, backward, clipping, AdamW) captured once for the one
// batch shape of equal-length data and replayed; the run equals eager to float32 rounding (graph
// mode sums the gradient norm in float32, eager in double), the capture line is logged and its
// figures go to metrics.jsonl; a checkpoint written in graph mode resumes in eager mode and one
// written in eager mode resumes in graph mode.
TEST(Finetune, GraphModeEqualsEagerAndResumesAcrossModes) {
  Data train = pattern_data(16, 7);
  for (Example& e : train.examples) {  // one length: one batch shape, one graph
    e.ids.resize(6);
    e.labels.resize(6);
  }
  TempDir eager("finetune_eager"), graph("finetune_graph"), resumed("finetune_graph_resumed");
  finetune::Options o = lora_options(eager.str());
  o.lora.lora_dropout = 0.1;  // random masks replay as eager draws them
  o.pad_to_multiple_of = 8;   // the same batches in both modes (graph mode's default is 64)
  o.max_steps = 6;
  o.batch_size = 4;
  o.save_every = 3;
  finetune::Result a = finetune::run(o, train);
  o.out = graph.str();
  o.mode = finetune::parse_mode("graph");
  std::vector<std::string> lines;
  finetune::Result b =
      finetune::run(o, train, nullptr, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_EQ(b.losses.size(), 6u);
  for (size_t s = 0; s < 6; ++s) {
    EXPECT_NEAR(b.losses[s], a.losses[s], 1e-5 * a.losses[s]) << "step " << s + 1;
    EXPECT_NEAR(b.grad_norms[s], a.grad_norms[s], 1e-5 * a.grad_norms[s]) << "step " << s + 1;
  }
  int captures = 0;
  for (const std::string& l : lines)
    if (l.rfind("graph: ", 0) == 0) {
      ++captures;
      // The frozen output layer, its loss (seeded by the micro-batch's weight, in the backward)
      // and dx in one op.
      EXPECT_NE(l.find("linear+cross-entropy 1, "), std::string::npos) << l;
      EXPECT_NE(l.find("output layer gradients 1, "), std::string::npos) << l;
    }
  EXPECT_EQ(captures, 1);
  std::map<std::string, int> names;
  std::ifstream metrics(graph / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    ++names[nlohmann::json::parse(line)["name"].get<std::string>()];
  for (const char* name : {"graph/ops", "graph/ops_after_fusion", "graph/activations_mb_after"})
    EXPECT_EQ(names[name], 1) << name;

  // graph -> eager, and eager -> graph, from the checkpoints at step 3.
  for (const auto& [from, mode] : {std::pair{graph.str(), "pynative"}, {eager.str(), "graph"}}) {
    o.out = resumed.str();
    o.resume = from + "/checkpoint-3";
    o.mode = finetune::parse_mode(mode);
    finetune::Result r = finetune::run(o, train);
    ASSERT_EQ(r.losses.size(), 3u);
    for (size_t s = 0; s < 3; ++s)
      EXPECT_NEAR(r.losses[s], a.losses[s + 3], 1e-5 * a.losses[s + 3]) << mode << s + 4;
  }
  try {
    finetune::parse_mode("turbo");
    ADD_FAILURE() << "--mode turbo accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown --mode 'turbo'"), std::string::npos) << e.what();
  }
}

// Batches of examples of 6-12 tokens: graph mode pads them to a multiple of 64 by default, so
// the run captures one graph (each batch length would be one of its own); pynative mode with the
// same padding trains the same steps (dropout draws over the padded shape); padding changes no
// loss (without dropout); the padding is a run setting a resumed run must share.
TEST(Finetune, GraphModePadsBatchesToFewShapes) {
  Data train = pattern_data(16, 9);
  TempDir dir("finetune_pad");
  auto run = [&](const std::string& mode, int64_t pad, double dropout, std::string resume = "",
                 std::vector<std::string>* lines = nullptr) {
    finetune::Options o = lora_options(dir.str() + "/" + mode + std::to_string(pad) +
                                       (resume.empty() ? "" : "-resumed"));
    o.mode = finetune::parse_mode(mode);
    o.pad_to_multiple_of = pad;
    o.lora.lora_dropout = dropout;
    o.max_steps = 6;
    o.batch_size = 4;
    o.save_every = 3;
    o.resume = resume;
    return finetune::run(o, train, nullptr, [&](const std::string& l) {
      if (lines) lines->push_back(l);
    });
  };
  auto captures = [](const std::vector<std::string>& lines) {
    int n = 0;
    for (const std::string& l : lines) n += l.rfind("graph: ", 0) == 0;
    return n;
  };
  std::vector<std::string> graph_lines, longest_lines;
  finetune::Result graph = run("graph", 0, 0.1, "", &graph_lines);
  EXPECT_EQ(captures(graph_lines), 1);
  bool told = false;
  for (const std::string& l : graph_lines)
    told |= l.find(
                "batches padded to a multiple of 64 tokens (at most 8 lengths): graph mode's "
                "default") != std::string::npos;
  EXPECT_TRUE(told);
  run("graph", 1, 0.1, "", &longest_lines);
  EXPECT_GT(captures(longest_lines), 2) << "each batch length a graph";

  finetune::Result eager = run("pynative", 64, 0.1);
  ASSERT_EQ(graph.losses.size(), 6u);
  ASSERT_EQ(eager.losses.size(), 6u);
  for (size_t s = 0; s < 6; ++s)
    EXPECT_NEAR(graph.losses[s], eager.losses[s], 1e-5 * eager.losses[s]) << "step " << s + 1;

  finetune::Result padded = run("pynative", 64, 0), longest = run("pynative", 1, 0);
  for (size_t s = 0; s < 6; ++s) {
    EXPECT_NEAR(padded.losses[s], longest.losses[s], 1e-5 * longest.losses[s]) << s + 1;
    EXPECT_NEAR(padded.grad_norms[s], longest.grad_norms[s], 1e-5 * longest.grad_norms[s]) << s;
  }

  const std::string checkpoint = dir.str() + "/graph0/checkpoint-3";
  try {
    run("pynative", 0, 0.1, checkpoint);
    ADD_FAILURE() << "resumed with other padding";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pad_to_multiple_of: 1 (the checkpoint's: 64)"),
              std::string::npos)
        << e.what();
  }
  finetune::Result resumed = run("pynative", 64, 0.1, checkpoint);
  ASSERT_EQ(resumed.losses.size(), 3u);
  for (size_t s = 0; s < 3; ++s)
    EXPECT_NEAR(resumed.losses[s], graph.losses[s + 3], 1e-5 * graph.losses[s + 3]) << s + 4;
}

TEST(SpikeGuard, SkipsSpikesAndAsksForARollbackAfterThreeInARow) {
  using V = finetune::SpikeGuard::Verdict;
  finetune::SpikeGuard guard(3.0, 3, /*window=*/4, /*min_history=*/3);
  // Too little history: a large loss is accepted.
  EXPECT_EQ(guard.check(2.0, 1), V::ok);
  EXPECT_EQ(guard.check(20.0, 1), V::ok);
  EXPECT_EQ(guard.check(2.0, 1), V::ok);
  EXPECT_DOUBLE_EQ(guard.median(), 2.0);
  std::string why;
  EXPECT_EQ(guard.check(6.5, 1, &why), V::skip);
  EXPECT_NE(why.find("above 3 x the running median 2"), std::string::npos) << why;
  EXPECT_EQ(guard.check(5.9, 1), V::ok) << "below 3 x 2";
  EXPECT_EQ(guard.check(NAN, 1, &why), V::skip);
  EXPECT_NE(why.find("the loss is nan"), std::string::npos) << why;
  EXPECT_EQ(guard.check(2.0, INFINITY, &why), V::skip);
  EXPECT_NE(why.find("gradient norm is inf"), std::string::npos) << why;
  EXPECT_EQ(guard.check(100.0, 1), V::rollback) << "the third in a row";
  EXPECT_EQ(guard.check(100.0, 1), V::skip) << "counting starts over";
  EXPECT_EQ(guard.check(2.0, 1), V::ok);
  // The window keeps the last 4 accepted losses: 2, 5.9, 2 -> median 2 ... then 3, 3, 3.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(guard.check(3.0, 1), V::ok);
  EXPECT_DOUBLE_EQ(guard.median(), 3.0);
  EXPECT_EQ(finetune::SpikeGuard(0, 3).check(1e30, 1), V::ok) << "factor 0: off";
}

// An injected spike is skipped (an event in metrics.jsonl); three non-finite steps in a row roll
// the adapters back to the start (B = 0 again) and halve the learning rate.
// In graph mode too: a skipped step leaves its replay unfinished (nothing applied), a rollback
// drops the compiled graphs.
TEST(Finetune, SpikeGuardSkipsAndRollsBack) {
  for (const char* mode : {"pynative", "graph"}) {
    SCOPED_TRACE(mode);
    TempDir dir(std::string("finetune_spike_") + mode);
    Data train = pattern_data(16, 8);
    finetune::Options o = lora_options(dir.str());
    o.max_steps = 14;
    o.batch_size = 4;
    o.schedule = finetune::parse_schedule("constant");
    o.mode = finetune::parse_mode(mode);
    o.inject = [](int64_t step, double& loss, double& grad_norm) {
      if (step == 10) loss *= 10;
      if (step >= 12) grad_norm = NAN;
    };
    finetune::Result r = finetune::run(o, train);
    EXPECT_EQ(r.spikes, 4);
    EXPECT_EQ(r.rollbacks, 1);
    for (const auto& [name, t] : adapter_tensors(dir.str()))
      if (name.back() == 'B') {
        for (double v : t.to_double_vector()) ASSERT_EQ(v, 0.0) << name << " was not rolled back";
      }
    std::vector<nlohmann::json> events;
    std::map<int64_t, double> lr;
    std::ifstream metrics(dir / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("event")) events.push_back(j);
      if (j["name"] == "learning_rate") lr[j["step"].get<int64_t>()] = j["value"].get<double>();
    }
    ASSERT_EQ(events.size(), 5u);
    EXPECT_EQ(events[0]["step"], 10);
    EXPECT_EQ(events[0]["name"], "spike");
    EXPECT_NE(events[0]["event"].get<std::string>().find("update skipped"), std::string::npos);
    EXPECT_EQ(events[4]["name"], "rollback");
    EXPECT_EQ(events[4]["step"], 14);
    EXPECT_DOUBLE_EQ(events[4]["value"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(lr[13], o.lr);
  }
}

TEST(Finetune, PackingFillsSequencesAndLearnsNoBoundary) {
  Data d;
  d.examples = {{{1, 5, 2}, {-100, 5, 2}}, {{1, 6, 7, 2}, {1, 6, 7, 2}}, {{1, 8, 9, 10, 2}, {}}};
  d.examples[2].labels = d.examples[2].ids;
  Data p = finetune::pack(d, 8);
  ASSERT_EQ(p.examples.size(), 2u);
  EXPECT_EQ(p.examples[0].ids, (std::vector<int64_t>{1, 5, 2, 1, 6, 7, 2}));
  EXPECT_EQ(p.examples[0].labels, (std::vector<int64_t>{-100, 5, 2, -100, 6, 7, 2}));
  EXPECT_EQ(p.examples[1].ids, d.examples[2].ids);
  EXPECT_EQ(p.examples[1].labels, d.examples[2].labels);

  TempDir dir("finetune_packing");
  finetune::Options o = lora_options(dir.str());
  o.packing = true;
  o.max_seq_len = 32;
  o.max_steps = 2;
  o.batch_size = 2;
  finetune::Result r = finetune::run(o, pattern_data(16, 9));
  EXPECT_EQ(r.steps, 2);
  EXPECT_TRUE(std::isfinite(r.losses.back()));
}

// Full fine-tuning resumes bit for bit too (the float32 model of the checkpoint, AdamW state).
TEST(Finetune, FullResumeContinuesBitForBit) {
  Data train = pattern_data(8, 11);
  TempDir whole("finetune_full_whole"), resumed("finetune_full_resumed");
  finetune::Options o = lora_options(whole.str());
  o.method = finetune::parse_method("full");
  o.lr = 1e-3;
  o.max_steps = 4;
  o.batch_size = 4;
  o.save_every = 2;
  finetune::Result a = finetune::run(o, train);
  o.out = resumed.str();
  o.resume = whole / "checkpoint-2";
  finetune::Result b = finetune::run(o, train);
  ASSERT_EQ(b.losses.size(), 2u);
  EXPECT_EQ(b.losses[0], a.losses[2]);
  EXPECT_EQ(b.losses[1], a.losses[3]);
  auto wa = models::Llama::from_pretrained(whole.str())->hf_state();
  auto wb = models::Llama::from_pretrained(resumed.str())->hf_state();
  for (const auto& [name, t] : wa) EXPECT_EQ(scaled_error(wb.at(name), t), 0.0) << name;
}

std::string run_error(const finetune::Options& o) {
  try {
    finetune::run(o, pattern_data(4, 6));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string parse_error(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// The typed settings keep their names: what flags and checkpoints spell, parsed back.
TEST(Finetune, SettingsNamesRoundTrip) {
  for (auto m : {finetune::Method::lora, finetune::Method::full})
    EXPECT_EQ(finetune::parse_method(finetune::name(m)), m);
  for (auto s : {finetune::Schedule::cosine, finetune::Schedule::wsd, finetune::Schedule::constant})
    EXPECT_EQ(finetune::parse_schedule(finetune::name(s)), s);
  for (auto a : {finetune::Amp::O0, finetune::Amp::O1, finetune::Amp::O2})
    EXPECT_EQ(finetune::parse_amp(finetune::name(a)), a);
  EXPECT_EQ(finetune::parse_mode("graph"), finetune::Mode::graph);
  EXPECT_EQ(finetune::parse_amp_dtype("fp16"), DType::f16);
  EXPECT_STREQ(finetune::amp_dtype_name(DType::bf16), "bf16");
  nn::LoraSettings lora;
  finetune::set_lora_targets(lora, "q_proj,,o_proj");
  EXPECT_EQ(lora.target_modules, (std::vector<std::string>{"q_proj", "o_proj"}));
  EXPECT_EQ(finetune::lora_targets(lora), "q_proj,o_proj");
  finetune::set_lora_targets(lora, "all-linear");
  EXPECT_TRUE(lora.all_linear && lora.target_modules.empty());
  EXPECT_EQ(finetune::lora_targets(lora), "all-linear");
  // The recipe's defaults, on the one LoRA settings struct (its scaling alpha / r).
  const finetune::Options o;
  EXPECT_EQ(finetune::lora_targets(o.lora), "q_proj,v_proj");
  EXPECT_DOUBLE_EQ(o.lora.scaling(), 16.0 / 8.0);
}

TEST(Finetune, BadSettingsAreErrors) {
  TempDir dir("finetune_errors");
  finetune::Options o = lora_options(dir.str());
  finetune::set_lora_targets(o.lora, "q_proj,gate");
  const std::string e = run_error(o);
  EXPECT_NE(e.find("target module 'gate' not in the model"), std::string::npos) << e;
  EXPECT_NE(e.find("q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head"),
            std::string::npos)
      << "lists the model's linear layers: " << e;
  o = lora_options(dir.str());
  o.lora.r = 0;
  EXPECT_NE(run_error(o).find("--lora-r must be positive, got 0"), std::string::npos);
  EXPECT_NE(parse_error([] {
              finetune::parse_method("qlora");
            }).find("unknown --method 'qlora' (lora, full)"),
            std::string::npos);
  EXPECT_NE(parse_error([] {
              finetune::parse_schedule("linear");
            }).find("unknown --schedule 'linear' (cosine, wsd, constant)"),
            std::string::npos);
  EXPECT_NE(parse_error([] {
              finetune::parse_init("zeros");
            }).find("unknown --init 'zeros' (pretrained, random)"),
            std::string::npos);
  nn::LoraSettings lora;
  EXPECT_NE(
      parse_error([&] { finetune::set_lora_targets(lora, ","); }).find("--lora-targets is empty"),
      std::string::npos);
  o = lora_options(dir.str());
  o.epochs = 0;
  EXPECT_NE(run_error(o).find("give --epochs N or --max-steps N"), std::string::npos);
}

}  // namespace
}  // namespace zenith::testing
