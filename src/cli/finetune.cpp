// `zenith finetune --model DIR --data FILE.jsonl [--eval-data FILE] --method lora|full
// [--lora-r 8] [--lora-alpha 16] [--lora-dropout 0.05] [--lora-targets q_proj,v_proj|all-linear]
// [--init pretrained|random [--model-config CONFIG.json]] [--epochs N | --max-steps N] [--lr 3e-4]
// [--schedule cosine|wsd|constant] [--warmup-steps N]
// [--batch-size B] [--accumulate-steps K] [--max-seq-len L] [--train-on-prompt] [--packing]
// [--pad-to-multiple-of N]
// [--chat-template NAME] [--activation-checkpointing [--activation-checkpointing-policy
// full|selective|LIST]] [--amp O0|O1|O2 [--amp-dtype bf16|fp16]]
// [--save-every N] [--resume DIR] [--mode pynative|graph]
// [--nproc N [--max-restarts N]] [--profile STEPS [--profile-skip N]] [--config FILE.yaml]
// --out DIR`:
// supervised fine-tuning of a LLaMA-family HF directory on JSONL data (Alpaca, chat messages,
// text, pre-tokenized ids). LoRA writes a PEFT adapter directory, full an HF model directory;
// both with metrics.jsonl, tensorboard/ and eval_log.json (with --eval-data).
// Data parallel: --nproc N runs N ranks of this command as a platform job in the foreground
// (rank_launcher.h), as a job YAML with `npu: N` does; each rank takes --batch-size examples of
// every micro-batch, so N ranks train as one process with --batch-size N*B. Rank 0 writes OUT.
// A restarted job (--max-restarts) resumes from OUT's newest checkpoint-<step>.
#include "zenith/finetune.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "cli/llm_common.h"
#include "cli/profile_flags.h"
#include "cli/rank_launcher.h"
#include "cli/settings_schema.h"
#include "zenith/communication.h"

namespace zenith::cli {
namespace {

SettingsSchema finetune_schema(finetune::Options& o) {
  SettingsSchema s("finetune");
  s.add("model", o.model, "base model directory (HF: config.json, safetensors, tokenizer)")
      .add("data", o.data, "training data, JSONL: Alpaca, chat messages, text or input_ids")
      .add("eval-data", o.eval_data, "held-out JSONL data: eval loss and perplexity")
      .add("out", o.out, "output directory (adapter or model, metrics, eval_log.json)")
      .add("method", o.method, "lora or full")
      .add("init", o.init, "pretrained, or random: train from scratch (with --method full)")
      .add("model-config", o.model_config,
           "config.json of the model --init random creates (default: --model's)")
      .add("lora-r", o.lora_r, "LoRA rank")
      .add("lora-alpha", o.lora_alpha, "LoRA alpha (scaling alpha / r)")
      .add("lora-dropout", o.lora_dropout, "dropout on the LoRA input")
      .add("lora-targets", o.lora_targets, "modules to adapt: q_proj,v_proj,... or all-linear")
      .add("use-rslora", o.use_rslora, "scaling alpha / sqrt(r) (rsLoRA)")
      .add("epochs", o.epochs, "passes over the data")
      .add("max-steps", o.max_steps, "optimizer steps (overrides --epochs when > 0)")
      .add("lr", o.lr, "peak learning rate (AdamW)")
      .add("weight-decay", o.weight_decay, "AdamW weight decay")
      .add("clip-grad-norm", o.clip_grad_norm, "clip the gradient norm to this (0: off)")
      .add("schedule", o.schedule, "cosine, wsd or constant, after linear warmup")
      .add("warmup-steps", o.warmup_steps, "warmup steps (-1: 3% of the steps)")
      .add("batch-size", o.batch_size, "sequences per micro-batch (padded to the longest)")
      .add("accumulate-steps", o.accumulate_steps, "micro-batches per optimizer step")
      .add("max-seq-len", o.max_seq_len, "truncate longer sequences (counted)")
      .add("train-on-prompt", o.train_on_prompt, "learn the prompt tokens too")
      .add("packing", o.packing, "pack examples into sequences of --max-seq-len (no padding)")
      .add("pad-to-multiple-of", o.pad_to_multiple_of,
           "pad each batch's length up to a multiple of this (0: 1 in pynative mode; in graph "
           "mode 64, or --max-seq-len / 8 rounded up to a multiple of 64)")
      .add("chat-template", o.chat_template, "llama-2, llama-3, chatml or alpaca")
      .add("activation-checkpointing", o.activation_checkpointing,
           "recompute each decoder layer in backward (less memory, more time)")
      .add("activation-checkpointing-policy", o.activation_checkpointing_policy,
           "full: recompute the whole layer from its input; selective: keep the outputs of the "
           "costly GEMMs (gate/up/down_proj) and recompute the rest; or a comma list of q_proj, "
           "k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, attention to keep")
      .add("amp", o.amp,
           "mixed precision: O0 float32, O1 linear layers in --amp-dtype, O2 all but norms "
           "(float32 masters; CPUs store, not compute, in low precision)")
      .add("amp-dtype", o.amp_dtype, "bf16, or fp16 (with dynamic loss scaling)")
      .add("mode", o.mode, "pynative, or graph: capture each step once and replay it")
      .add("seed", o.seed, "seed of the shuffling, LoRA init and dropout")
      .add("log-every", o.log_every, "steps between metrics lines")
      .add("eval-every", o.eval_every, "steps between evaluations (0: before and after)")
      .add("save-every", o.save_every, "steps between checkpoints out/checkpoint-<step>")
      .add("resume", o.resume, "continue from this checkpoint directory (same settings)")
      .add("spike-factor", o.spike_factor,
           "skip a step whose loss is above this x the running median (0: off)")
      .add("spike-rollback", o.spike_rollback,
           "spikes in a row that roll back to the last good checkpoint at half the rate");
  return s;
}

int run_finetune(int argc, char** argv) {
  finetune::Options o;
  const SettingsSchema schema = finetune_schema(o);
  std::string config = prescan_flag(argc, argv, "--config");
  if (!config.empty()) schema.apply_yaml_file(config);
  CLI::App app{"Fine-tune a LLaMA-family model (LoRA or full) on JSONL data", "zenith finetune"};
  app.add_option("--config", config, "YAML file of settings (flags override it)");
  RankLauncher launcher("finetune");
  launcher.add_flags(app);
  ProfileFlags profile;
  profile.add(app);
  int64_t inject_spike = 0;
  app.add_option("--inject-spike", inject_spike,
                 "testing aid: the spike guard sees step N's loss x 100 (a spike, its metrics "
                 "event and, in a platform job, its alert)");
  schema.add_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  ZENITH_CHECK((!o.model.empty() || !o.model_config.empty()) && !o.data.empty() && !o.out.empty(),
               "[finetune] --model DIR (or --init random --model-config FILE), --data FILE.jsonl "
               "and --out DIR are required");
  profile.check();
  if (inject_spike > 0)
    o.inject = [inject_spike](int64_t step, double& loss, double&) {
      if (step == inject_spike) loss *= 100;
    };
  const int world_env = env_world_size("finetune");
  launcher.check(world_env);
  if (launcher.launches()) return launcher.launch(argc, argv);
  if (o.resume.empty()) o.resume = restart_checkpoint("finetune", o.out);
  const models::LlamaConfig model_config =
      models::load_llama_config(finetune::model_config_path(o));
  auto tokenizer = text::Tokenizer::find_in_dir(o.model);
  const finetune::DataOptions data_options = finetune::data_options(o, model_config);
  const finetune::Data train = finetune::load_data(o.data, tokenizer.get(), data_options);
  std::optional<finetune::Data> eval;
  if (!o.eval_data.empty()) eval = finetune::load_data(o.eval_data, tokenizer.get(), data_options);
  auto print = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  const RankPlace place = join_ranks(world_env, 0);
  if (auto p = profile.callback(o.out, place.rank, place.world, o.mode == "graph"))
    o.callbacks.push_back(p);
  finetune::run(o, train, eval ? &*eval : nullptr, print);
  if (place.world > 1) communication::release();
  return 0;
}

}  // namespace

ZENITH_COMMAND("finetune", "Fine-tune a LLaMA-family model (LoRA or full) on JSONL data",
               run_finetune);

}  // namespace zenith::cli
