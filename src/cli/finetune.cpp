// `zenith finetune --model DIR --data FILE.jsonl [--eval-data FILE] --method lora|full
// [--quant nf4|q4_0 [--double-quant on|off]] [--lora-r 8] [--lora-alpha 16] [--lora-dropout 0.05]
// [--lora-targets q_proj,v_proj|all-linear]
// [--init pretrained|random [--model-config CONFIG.json]] [--epochs N | --max-steps N] [--lr 3e-4]
// [--schedule cosine|wsd|constant] [--warmup-steps N]
// [--batch-size B] [--accumulate-steps K] [--max-seq-len L] [--train-on-prompt] [--packing]
// [--pad-to-multiple-of N]
// [--chat-template NAME] [--activation-checkpointing [--activation-checkpointing-policy
// full|selective|LIST]] [--amp O0|O1|O2 [--amp-dtype bf16|fp16]]
// [--eval-steps N] [--save-every N] [--resume DIR] [--mode pynative|graph] [--threads N]
// [--progress auto|bar|plain|none] [--nproc N [--max-restarts N]]
// [--profile STEPS [--profile-skip N]] [--config FILE.yaml] --out DIR [--overwrite-output-dir]`:
// supervised fine-tuning of a LLaMA-family HF directory on JSONL data (Alpaca, chat messages,
// text, pre-tokenized ids). LoRA writes a PEFT adapter directory, full an HF model directory;
// both with metrics.jsonl, tensorboard/ and eval_log.json (with --eval-data). A non-empty --out
// is refused unless --overwrite-output-dir or --resume says what to do (output_dir.h).
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
#include "cli/output_dir.h"
#include "cli/parallel_config.h"
#include "cli/profile_flags.h"
#include "cli/progress.h"
#include "cli/rank_launcher.h"
#include "cli/settings_schema.h"
#include "zenith/communication.h"
#include "zenith/context.h"
#include "zenith/error.h"
#include "zenith/gguf.h"

namespace zenith::cli {
namespace {

// The settings the CLI holds as text (flags, YAML) before they become finetune::Options' typed
// values, and those of the command itself.
struct CliSettings {
  std::string method, init, lora_targets, schedule, amp, amp_dtype, mode, quant, double_quant;
  std::string progress = "auto";
  int64_t threads = 0;
  bool overwrite_output_dir = false;

  explicit CliSettings(const finetune::Options& o)
      : method(o.quant.empty() ? finetune::name(o.method) : "qlora"),
        init(finetune::name(o.init)),
        lora_targets(finetune::lora_targets(o.lora)),
        schedule(finetune::name(o.schedule)),
        amp(finetune::name(o.amp)),
        amp_dtype(finetune::amp_dtype_name(o.amp_dtype)),
        mode(finetune::name(o.mode)),
        quant(o.quant.empty() || o.quant == "nf4_f32" ? "nf4" : o.quant),
        double_quant(o.quant == "nf4_f32" ? "off" : "on") {}
  // Into `o`; unknown names are errors naming the flag and the choices.
  void apply(finetune::Options& o) const {
    // qlora is LoRA on a base quantized at load (--quant)
    o.method = finetune::parse_method(method == "qlora" ? "lora" : method);
    ZENITH_CHECK(method != "qlora" || quant == "nf4" || quant == "q4_0",
                 "[finetune] --quant must be nf4 or q4_0, got '", quant, "'");
    ZENITH_CHECK(double_quant == "on" || double_quant == "off",
                 "[finetune] --double-quant must be on or off, got '", double_quant, "'");
    // off: nf4's absmax kept as float32 per 64 weights (bitsandbytes' bnb_4bit_use_double_quant
    // False), the nf4_f32 format; only nf4 has a double quantization to turn off
    ZENITH_CHECK(double_quant == "on" || (method == "qlora" && quant == "nf4"),
                 "[finetune] --double-quant off applies to --method qlora --quant nf4 only, got ",
                 method == "qlora" ? "--quant " + quant : "--method " + method);
    o.quant = method != "qlora" ? "" : double_quant == "off" ? "nf4_f32" : quant;
    o.init = finetune::parse_init(init);
    finetune::set_lora_targets(o.lora, lora_targets);
    o.schedule = finetune::parse_schedule(schedule);
    o.amp = finetune::parse_amp(amp);
    o.amp_dtype = finetune::parse_amp_dtype(amp_dtype);
    o.mode = finetune::parse_mode(mode);
  }
};

SettingsSchema finetune_schema(finetune::Options& o, CliSettings& c) {
  SettingsSchema s("finetune");
  s.add("model", o.model,
        "(required, here or in --config, unless --init random) base model directory (HF: "
        "config.json, safetensors, tokenizer) or GGUF file")
      .add("data", o.data,
           "(required, here or in --config) training data, JSONL: Alpaca, chat messages, "
           "prompt/completion, text or input_ids")
      .add("eval-data", o.eval_data, "held-out JSONL data: eval loss and perplexity")
      .add("out", o.out,
           "(required, here or in --config) output directory (adapter or model, metrics, "
           "eval_log.json)")
      .add("overwrite-output-dir", c.overwrite_output_dir,
           "replace the run in a non-empty --out (its run files are deleted first)")
      .add("method", c.method, "lora, qlora (LoRA on a 4-bit base, --quant) or full")
      .add("quant", c.quant, "qlora's base format: nf4 (QLoRA's NormalFloat) or q4_0")
      .add("double-quant", c.double_quant,
           "on or off: nf4's block absmax as 8-bit codes (about 4.2 bits a weight) or "
           "float32 (4.5)")
      .add("init", c.init, "pretrained, or random: train from scratch (with --method full)")
      .add("model-config", o.model_config,
           "config.json of the model --init random creates (default: --model's)")
      .add("lora-r", o.lora.r, "LoRA rank")
      .add("lora-alpha", o.lora.lora_alpha, "LoRA alpha (scaling alpha / r)")
      .add("lora-dropout", o.lora.lora_dropout, "dropout on the LoRA input")
      .add("lora-targets", c.lora_targets, "modules to adapt: q_proj,v_proj,... or all-linear")
      .add("use-rslora", o.lora.use_rslora, "scaling alpha / sqrt(r) (rsLoRA)")
      .add("epochs", o.epochs, "passes over the data")
      .add("max-steps", o.max_steps, "optimizer steps (overrides --epochs when > 0)")
      .add("lr", o.lr, "peak learning rate (AdamW)")
      .add("weight-decay", o.weight_decay, "AdamW weight decay")
      .add("clip-grad-norm", o.clip_grad_norm, "clip the gradient norm to this (0: off)")
      .add("schedule", c.schedule, "cosine, wsd or constant, after linear warmup")
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
      .add("amp", c.amp,
           "mixed precision: O0 float32, O1 linear layers in --amp-dtype, O2 all but norms "
           "(float32 masters; CPUs store, not compute, in low precision)")
      .add("amp-dtype", c.amp_dtype, "bf16, or fp16 (with dynamic loss scaling)")
      .add("mode", c.mode, "pynative, or graph: capture each step once and replay it")
      .add("zero", o.zero_stage,
           "ZeRO stage over the data-parallel ranks (full or LoRA): 1 shards AdamW's states, "
           "2 also the gradients, 3 also the weights (gathered per layer; 0: off)")
      .add("tensor-parallel", o.tensor_parallel,
           "tensor-parallel degree over the ranks: attention heads, MLP and vocabulary split "
           "(Megatron); must divide the heads")
      .add("pipeline-parallel", o.pipeline_parallel,
           "pipeline stages of whole decoder layers over the ranks (1F1B schedule)")
      .add("micro-batches", o.micro_batches,
           "pipeline micro-batches each step's --batch-size splits into")
      .add("sequence-parallel", o.sequence_parallel,
           "with --tensor-parallel: norms and residuals split along the sequence")
      .add("threads", c.threads, "compute threads (0: the default)")
      .add("progress", c.progress, "auto, bar, plain or none (auto: a bar on a terminal)")
      .add("seed", o.seed, "seed of the shuffling, LoRA init and dropout")
      .add("log-every", o.log_every, "steps between metrics lines")
      .add("eval-steps", o.eval_steps, "steps between evaluations (0: before and after)")
      .add("save-every", o.save_every, "steps between checkpoints out/checkpoint-<step>")
      .add("resume", o.resume, "continue from this checkpoint directory (same settings)")
      .add("spike-factor", o.spike_factor,
           "skip a step whose loss is above this x the running median (0: off)")
      .add("spike-rollback", o.spike_rollback,
           "spikes in a row that roll back to the last good checkpoint at half the rate");
  return s;
}

// What a finetune run writes into --out (--overwrite-output-dir deletes these).
const OutputDirRule kOutputDir{"finetune",
                               {"*.json", "*.jsonl", "*.safetensors", "tokenizer.model",
                                "tensorboard", "checkpoint-*", "profile"}};

int run_finetune(int argc, char** argv) {
  finetune::Options o;
  CliSettings cli(o);
  const SettingsSchema schema = finetune_schema(o, cli);
  refuse_renamed_eval_flag(argc, argv, "finetune", "--eval-steps");
  std::string config = prescan_flag(argc, argv, "--config");
  int64_t data_parallel = 0;  // MindFormers' parallel_config, then the file's other keys
  if (!config.empty()) {
    data_parallel = apply_parallel_config(config, o);
    schema.apply_yaml_file(config, {kParallelConfigKey});
  }
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
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  cli.apply(o);
  ZENITH_CHECK((!o.model.empty() || !o.model_config.empty()) && !o.data.empty() && !o.out.empty(),
               "[finetune] --model DIR (or --init random --model-config FILE), --data FILE.jsonl "
               "and --out DIR are required");
  profile.check();
  const ProgressMode progress_mode = parse_progress_mode(cli.progress);
  ZENITH_CHECK(cli.threads >= 0, "[finetune] --threads must be >= 0, got ", cli.threads);
  if (inject_spike > 0)
    o.inject = [inject_spike](int64_t step, double& loss, double&) {
      if (step == inject_spike) loss *= 100;
    };
  const int world_env = env_world_size("finetune");
  launcher.check(world_env);
  prepare_output_dir(kOutputDir, o.out, cli.overwrite_output_dir, !o.resume.empty());
  if (launcher.launches()) return launcher.launch(argc, argv);
  if (o.resume.empty()) o.resume = restart_checkpoint("finetune", o.out);
  if (cli.threads > 0) context::set_num_threads(int(cli.threads));
  const models::LlamaConfig model_config =
      models::load_llama_config(finetune::model_config_path(o));
  auto tokenizer = models::find_model_tokenizer(o.model);
  const finetune::DataOptions data_options = finetune::data_options(o, model_config);
  const finetune::Data train = finetune::load_data(o.data, tokenizer.get(), data_options);
  std::optional<finetune::Data> eval;
  if (!o.eval_data.empty()) eval = finetune::load_data(o.eval_data, tokenizer.get(), data_options);
  const Ranks ranks = join_ranks(world_env, cli.threads);
  check_data_parallel(data_parallel, o, ranks.world());
  auto progress =
      std::make_shared<StepProgress>(ranks.rank() == 0 ? progress_mode : ProgressMode::kNone);
  o.callbacks.push_back(progress);
  if (ranks.writes())
    progress->print("[finetune] " + std::to_string(context::get_num_threads()) +
                    " compute threads");
  if (auto p =
          profile.callback(o.out, ranks.rank(), ranks.world(), o.mode == finetune::Mode::graph))
    o.callbacks.push_back(p);
  finetune::run(o, train, eval ? &*eval : nullptr,
                [&](const std::string& line) { progress->print(line); });
  if (ranks.world() > 1) communication::release();
  return 0;
}

}  // namespace

ZENITH_COMMAND("finetune", "Fine-tune a LLaMA-family model (LoRA or full) on JSONL data",
               run_finetune);

}  // namespace zenith::cli
