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
  CliResult p = run_zenith("perplexity --model " + model + " --adapter " + dir.str() + " --text " +
                           (dir / "sentence.txt") + " --json");
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

}  // namespace
}  // namespace zenith::testing
