// `zenith finetune` as a user runs it: LoRA on the demo model (examples/llm/demo-llama) with the
// GPL-3 data of scripts/make_finetune_data.py, its PEFT adapter used by generate and perplexity,
// settings from a YAML file, and malformed data reported by line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "support/chrome_trace_check.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"

namespace zenith::testing {
namespace {

std::string source(const std::string& path) { return std::string(ZENITH_SOURCE_DIR) + "/" + path; }

TEST(FinetuneCli, LoraOnTheDemoModelWritesAUsableAdapter) {
  TempDir dir("finetune_cli");
  const std::string model = source("examples/llm/demo-llama");
  CliResult r = run_zenith("finetune --model " + model + " --data " +
                           source("examples/llm/finetune/train.jsonl") + " --eval-data " +
                           source("examples/llm/finetune/eval.jsonl") + " --out " + dir.str() +
                           " --lora-targets all-linear --lr 3e-3 --max-steps 8 --batch-size 8");
  ASSERT_EQ(r.code, 0) << r.output;
  // The defaults and the data, said at the start.
  EXPECT_NE(r.output.find("LoRA r 8, alpha 16 (scaling 2), dropout 0.05, targets all-linear: "
                          "14 layers; base frozen in bfloat16"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("AdamW lr 0.003"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("158 examples (53 alpaca, 52 chat, 53 text)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("prompts masked"), std::string::npos) << r.output;

  for (const char* f : {"adapter_config.json", "adapter_model.safetensors", "metrics.jsonl",
                        "eval_log.json", "tensorboard"})
    EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 8);
  EXPECT_EQ(config["target_modules"], "all-linear");
  nlohmann::json log = nlohmann::json::parse(std::ifstream(dir / "eval_log.json"));
  ASSERT_EQ(log.size(), 2u);
  EXPECT_LT(log[1]["eval_loss"].get<double>(), log[0]["eval_loss"].get<double>());

  // The adapter works with the other commands.
  CliResult g = run_zenith("generate --model " + model + " --adapter " + dir.str() +
                           " --prompt \"The GNU General Public License\" --temperature 0 "
                           "--max-new-tokens 4 --json");
  ASSERT_EQ(g.code, 0) << g.output;
  EXPECT_EQ(nlohmann::json::parse(g.output)["tokens"].size(), 4u);
  std::ofstream(dir / "sentence.txt") << "You may charge any price or no price for each copy.";
  CliResult p = run_zenith("perplexity --model " + model + " --adapter " + dir.str() +
                           " --text-file " + (dir / "sentence.txt") + " --json");
  ASSERT_EQ(p.code, 0) << p.output;
  EXPECT_GT(nlohmann::json::parse(p.output)["tokens"].get<int64_t>(), 5);
}

TEST(FinetuneCli, SettingsFromYamlAndFlags) {
  TempDir dir("finetune_yaml");
  std::ofstream(dir / "run.yaml") << "finetune:\n  method: lora\n  lora_r: 4\n  max-steps: 2\n"
                                     "  batch-size: 4\n  schedule: constant\n";
  std::ofstream(dir / "data.jsonl") << R"({"instruction": "Say yes.", "output": "yes"})"
                                       "\n"
                                    << R"({"text": "Free software."})"
                                       "\n";
  CliResult r = run_zenith("finetune --config " + (dir / "run.yaml") + " --model " +
                           source("examples/llm/demo-llama") + " --data " + (dir / "data.jsonl") +
                           " --out " + (dir / "out") + " --lora-alpha 8");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("LoRA r 4, alpha 8 (scaling 2)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("constant schedule"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 2/2"), std::string::npos) << r.output;
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "out/adapter_config.json"));
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["target_modules"], nlohmann::json({"q_proj", "v_proj"}));
}

// The checkpointing policy from the YAML config, in graph mode too; an unknown one is refused
// with the names it knows.
TEST(FinetuneCli, CheckpointingPolicyFromYaml) {
  TempDir dir("finetune_ckpt_yaml");
  auto run = [&](const std::string& policy, const std::string& mode) {
    std::filesystem::remove_all(dir /
                                "out");  // each run its own, as --out asks (an empty directory)
    std::ofstream(dir / "run.yaml") << "finetune:\n  max-steps: 2\n  batch-size: 4\n"
                                       "  activation-checkpointing: true\n"
                                       "  activation-checkpointing-policy: "
                                    << policy << "\n";
    return run_zenith("finetune --config " + (dir / "run.yaml") + " --model " +
                      source("examples/llm/demo-llama") + " --data " +
                      source("examples/llm/finetune/train.jsonl") + " --out " + (dir / "out") +
                      " --mode " + mode);
  };
  CliResult r = run("q_proj,attention", "graph");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("activation checkpointing per decoder layer, q_proj,attention: keeps "
                          "the outputs of q_proj,attention"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step 2/2"), std::string::npos) << r.output;
  CliResult bad = run("qkv", "pynative");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("activation checkpointing policy 'qkv': unknown 'qkv' (expected "
                            "selective, full, or a comma list of q_proj"),
            std::string::npos)
      << bad.output;
}

// --profile STEPS as for zenith train: the trace holds each profiled step with the finetune
// step's phases (data wait, forward, backward, optimizer) and the ops inside them.
TEST(FinetuneCli, ProfileRecordsTheStepsPhases) {
  TempDir dir("finetune_profile");
  CliResult r = run_zenith("finetune --model " + source("examples/llm/demo-llama") + " --data " +
                           source("examples/llm/finetune/train.jsonl") + " --out " + dir.str() +
                           " --max-steps 4 --batch-size 4 --profile 2 --profile-skip 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("op (by self time)"), std::string::npos) << r.output;
  auto trace = nlohmann::json::parse(std::ifstream(dir / "profile/trace.json"));
  EXPECT_EQ(chrome_trace_problems(trace), std::vector<std::string>{});
  std::map<std::string, int> phases;
  int ops = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "step") ++phases["step"];  // named "step N"
    if (e["cat"] == "phase") ++phases[e["name"].get<std::string>()];
    ops += e["cat"] == "op";
  }
  EXPECT_EQ(phases["step"], 2);
  for (const char* phase : {"data wait", "forward", "backward", "optimizer"})
    EXPECT_EQ(phases[phase], 2) << phase;
  EXPECT_GT(ops, 0);
  auto summary = nlohmann::json::parse(std::ifstream(dir / "profile/summary.json"));
  EXPECT_EQ(summary["steps"], 2);
}

// The same in graph mode, where the profiled steps are replays (the capture and two replays
// skipped): each replayed phase is marked as its capture's (forward, backward, and optimizer
// twice: the gradient norm, the update), so the split is not all "other".
TEST(FinetuneCli, GraphModeProfileRecordsTheStepsPhases) {
  TempDir dir("finetune_profile_graph");
  CliResult r = run_zenith("finetune --model " + source("examples/llm/demo-llama") + " --data " +
                           source("examples/llm/finetune/train.jsonl") + " --out " + dir.str() +
                           " --max-steps 5 --batch-size 4 --mode graph --profile 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("after fusion"), std::string::npos) << r.output;  // captured
  EXPECT_EQ(r.output.find("runs eagerly"), std::string::npos) << r.output;
  auto trace = nlohmann::json::parse(std::ifstream(dir / "profile/trace.json"));
  EXPECT_EQ(chrome_trace_problems(trace), std::vector<std::string>{});
  std::map<std::string, int> phases;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "step") ++phases["step"];
    if (e["cat"] == "phase") ++phases[e["name"].get<std::string>()];
  }
  EXPECT_EQ(phases["step"], 2);
  for (const char* phase : {"data wait", "forward", "backward"})
    EXPECT_EQ(phases[phase], 2) << phase;
  EXPECT_EQ(phases["optimizer"], 4);
  auto summary = nlohmann::json::parse(std::ifstream(dir / "profile/summary.json"));
  std::map<std::string, double> ms;
  for (const auto& p : summary["phases"]) ms[p["name"]] = p["ms"];
  EXPECT_GT(ms["forward"], 0);
  EXPECT_GT(ms["backward"], 0);
  EXPECT_LT(ms["other"], ms["forward"] + ms["backward"]);
}

TEST(FinetuneCli, BadDataAndSettingsAreClearErrors) {
  TempDir dir("finetune_bad");
  std::ofstream(dir / "bad.jsonl") << "{\"text\": \"ok\"}\n{\"input_ids\": [1, 2], \"labels\": "
                                      "[1]}\n{\"output\": \"no instruction\"}\n";
  const std::string base = "finetune --model " + source("examples/llm/demo-llama") + " --out " +
                           (dir / "out") + " --max-steps 1";
  CliResult r = run_zenith(base + " --data " + (dir / "bad.jsonl"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("2 malformed lines"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad.jsonl:2: \"labels\" has 1 entries, \"input_ids\" 2"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bad.jsonl:3: no known format"), std::string::npos) << r.output;

  std::ofstream(dir / "ok.jsonl") << "{\"text\": \"ok\"}\n";
  r = run_zenith(base + " --data " + (dir / "ok.jsonl") + " --lora-targets q_proj,attn");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("target module 'attn' not in the model"), std::string::npos) << r.output;
  r = run_zenith(base + " --data " + (dir / "ok.jsonl") + " --lora-r 0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--lora-r must be positive, got 0"), std::string::npos) << r.output;
  r = run_zenith(base + " --data " + (dir / "missing.jsonl"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("cannot read data file"), std::string::npos) << r.output;
}

// Hugging Face's rule for --out: a directory holding files is refused (the first run's files
// untouched), --overwrite-output-dir deletes the run's files first (eval_log.json of a run with
// eval data gone, metrics not appended; other files kept), --resume continues there.
TEST(FinetuneCli, ANonEmptyOutIsRefusedUnlessOverwrittenOrResumed) {
  TempDir dir("finetune_out_rule");
  const std::string out = dir / "out";
  const std::string base = "finetune --model " + source("examples/llm/demo-llama") + " --data " +
                           source("examples/llm/finetune/train.jsonl") + " --out " + out +
                           " --max-steps 2 --batch-size 4 --save-every 1";
  CliResult r = run_zenith(base + " --eval-data " + source("examples/llm/finetune/eval.jsonl"));
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(std::filesystem::exists(dir / "out/eval_log.json"));
  std::ofstream(dir / "out/notes.txt") << "mine";
  auto losses = [&] {
    std::ifstream metrics(dir / "out/metrics.jsonl");
    int n = 0;
    for (std::string line; std::getline(metrics, line);)
      n += nlohmann::json::parse(line)["name"] == "loss";
    return n;
  };
  EXPECT_EQ(losses(), 2);

  r = run_zenith(base);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("the output directory " + out + " is not empty"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--overwrite-output-dir"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "out/eval_log.json"));
  EXPECT_EQ(losses(), 2);

  r = run_zenith(base + " --overwrite-output-dir");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out/eval_log.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "out/adapter_model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir / "out/notes.txt"));
  EXPECT_EQ(losses(), 2);

  r = run_zenith(base + " --resume " + (dir / "out/checkpoint-1") + " --overwrite-output-dir");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--overwrite-output-dir and --resume disagree"), std::string::npos)
      << r.output;
  r = run_zenith(base + " --resume " + (dir / "out/checkpoint-1"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
}

// --eval-steps N (Hugging Face's name) evaluates every N steps; --eval-every, its old name (which
// counted epochs in zenith train), is an error naming the new one. --threads sets the compute
// threads, as for train and eval.
TEST(FinetuneCli, EvalStepsAndThreads) {
  TempDir dir("finetune_eval_steps");
  const std::string base = "finetune --model " + source("examples/llm/demo-llama") + " --data " +
                           source("examples/llm/finetune/train.jsonl") + " --eval-data " +
                           source("examples/llm/finetune/eval.jsonl") +
                           " --max-steps 2 --batch-size 4 --out ";
  CliResult r = run_zenith(base + (dir / "a") + " --eval-steps 1 --threads 1");
  ASSERT_EQ(r.code, 0) << r.output;
  nlohmann::json log = nlohmann::json::parse(std::ifstream(dir / "a/eval_log.json"));
  ASSERT_EQ(log.size(), 3u);  // steps 0, 1, 2
  EXPECT_EQ(log[1]["step"], 1);
  EXPECT_NE(r.output.find("[finetune] 1 compute threads"), std::string::npos) << r.output;
  r = run_zenith(base + (dir / "b") + " --eval-every 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--eval-every was renamed: use --eval-steps N"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "b"));
}

// A terminal gets train's bar (steps, loss, tokens/s, ETA) below the log lines; without one
// (plain) the log lines alone, with their ETA, no control characters.
TEST(FinetuneCli, ProgressBarWithRateAndEta) {
  TempDir dir("finetune_progress");
  const std::string base = "finetune --model " + source("examples/llm/demo-llama") + " --data " +
                           source("examples/llm/finetune/train.jsonl") +
                           " --max-steps 3 --batch-size 4 --out ";
  CliResult bar = run_zenith(base + (dir / "bar") + " --progress bar");
  ASSERT_EQ(bar.code, 0) << bar.output;
  EXPECT_NE(bar.output.find("\r\033[Kstep [=========="), std::string::npos) << bar.output;
  EXPECT_NE(bar.output.find("] 3/3  loss "), std::string::npos) << bar.output;
  EXPECT_NE(bar.output.find(" tok/s  ETA 0:00"), std::string::npos) << bar.output;
  EXPECT_NE(bar.output.find("[finetune] step 3/3"), std::string::npos) << bar.output;
  CliResult plain = run_zenith(base + (dir / "plain") + " --progress plain");
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_EQ(plain.output.find('\033'), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("[finetune] step 3/3"), std::string::npos) << plain.output;
  // Its step lines carry the ETA as train's plain lines do: 0:00 left after the last step.
  EXPECT_NE(plain.output.find(" tokens/s, ETA 0:0"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find(" tokens/s, ETA 0:00\n"), std::string::npos) << plain.output;
}

}  // namespace
}  // namespace zenith::testing
