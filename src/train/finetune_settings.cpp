// finetune::Options: the choices' names, the checks, the record a checkpoint keeps of them and
// the learning-rate schedule they describe.
#include <array>
#include <sstream>
#include <utility>

#include "train/finetune_run.h"

namespace zenith::finetune {
namespace {

template <typename E, size_t N>
using Names = std::array<std::pair<E, const char*>, N>;

constexpr Names<Method, 2> kMethods{{{Method::lora, "lora"}, {Method::full, "full"}}};
constexpr Names<Init, 2> kInits{{{Init::pretrained, "pretrained"}, {Init::random, "random"}}};
constexpr Names<Schedule, 3> kSchedules{
    {{Schedule::cosine, "cosine"}, {Schedule::wsd, "wsd"}, {Schedule::constant, "constant"}}};
constexpr Names<Amp, 3> kAmps{{{Amp::O0, "O0"}, {Amp::O1, "O1"}, {Amp::O2, "O2"}}};
constexpr Names<Mode, 2> kModes{{{Mode::pynative, "pynative"}, {Mode::graph, "graph"}}};
constexpr Names<DType, 2> kAmpDtypes{{{DType::bf16, "bf16"}, {DType::f16, "fp16"}}};

template <typename E, size_t N>
const char* name_in(const Names<E, N>& names, E v) {
  for (const auto& [value, name] : names)
    if (value == v) return name;
  ZENITH_FAIL("[finetune] a value outside its enum: ", int(v));
}

// "[finetune] unknown --flag 'value' (a, b)"
template <typename E, size_t N>
E parse_in(const Names<E, N>& names, const char* flag, const std::string& s) {
  std::string known;
  for (const auto& [value, name] : names) {
    if (s == name) return value;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  ZENITH_FAIL("[finetune] unknown --", flag, " '", s, "' (", known, ")");
}

}  // namespace

const char* name(Method v) { return name_in(kMethods, v); }
const char* name(Init v) { return name_in(kInits, v); }
const char* name(Schedule v) { return name_in(kSchedules, v); }
const char* name(Amp v) { return name_in(kAmps, v); }
const char* name(Mode v) { return name_in(kModes, v); }
const char* amp_dtype_name(DType dtype) { return name_in(kAmpDtypes, dtype); }
Method parse_method(const std::string& s) { return parse_in(kMethods, "method", s); }
Init parse_init(const std::string& s) { return parse_in(kInits, "init", s); }
Schedule parse_schedule(const std::string& s) { return parse_in(kSchedules, "schedule", s); }
Amp parse_amp(const std::string& s) { return parse_in(kAmps, "amp", s); }
Mode parse_mode(const std::string& s) { return parse_in(kModes, "mode", s); }
DType parse_amp_dtype(const std::string& s) { return parse_in(kAmpDtypes, "amp-dtype", s); }

void set_lora_targets(nn::LoraSettings& lora, const std::string& list) {
  lora.target_modules.clear();
  lora.all_linear = list == "all-linear";
  if (lora.all_linear) return;
  std::stringstream s(list);
  for (std::string t; std::getline(s, t, ',');)
    if (!t.empty()) lora.target_modules.push_back(t);
  ZENITH_CHECK(!lora.target_modules.empty(),
               "[finetune] --lora-targets is empty: give module names (q_proj,v_proj) or "
               "all-linear");
}

std::string lora_targets(const nn::LoraSettings& lora) {
  if (lora.all_linear) return "all-linear";
  std::string list;
  for (const std::string& t : lora.target_modules) list += (list.empty() ? "" : ",") + t;
  return list;
}

namespace detail {

io::LoraConfig lora_config(const Options& o) {
  io::LoraConfig c;
  static_cast<nn::LoraSettings&>(c) = o.lora;
  c.base_model_name_or_path = o.model;
  ZENITH_CHECK(c.all_linear || !c.target_modules.empty(),
               "[finetune] --lora-targets is empty: give module names (q_proj,v_proj) or "
               "all-linear");
  return c;
}

nn::LRSchedule make_schedule(const Options& o, int64_t warmup, int64_t total) {
  switch (o.schedule) {
    case Schedule::cosine:
      return nn::warmup_cosine_lr(o.lr, warmup, total);
    case Schedule::wsd:  // decay over the last 20% (MiniCPM's WSD)
      return nn::warmup_stable_decay_lr(o.lr, warmup, warmup + (total - warmup) * 4 / 5, total);
    case Schedule::constant:
      break;
  }
  const double lr = o.lr;
  return nn::LRSchedule{
      [=](int64_t step) { return step < warmup ? lr * double(step + 1) / double(warmup) : lr; },
      "constant after warmup"};
}

nlohmann::json run_settings(const Options& o, int ranks, int64_t pad_to) {
  return {{"model", o.model},
          {"data", o.data},
          {"method", name(o.method)},
          {"init", name(o.init)},
          {"model_config", o.model_config},
          {"lora_r", o.lora.r},
          {"lora_alpha", o.lora.lora_alpha},
          {"lora_dropout", o.lora.lora_dropout},
          {"lora_targets", lora_targets(o.lora)},
          {"use_rslora", o.lora.use_rslora},
          {"epochs", o.epochs},
          {"max_steps", o.max_steps},
          {"lr", o.lr},
          {"weight_decay", o.weight_decay},
          {"clip_grad_norm", o.clip_grad_norm},
          {"schedule", name(o.schedule)},
          {"warmup_steps", o.warmup_steps},
          {"batch_size", o.batch_size},
          {"accumulate_steps", o.accumulate_steps},
          {"max_seq_len", o.max_seq_len},
          {"train_on_prompt", o.train_on_prompt},
          {"packing", o.packing},
          {"pad_to_multiple_of", pad_to},
          {"chat_template", o.chat_template},
          {"seed", o.seed},
          {"ranks", ranks},
          {"amp", name(o.amp)},
          {"amp_dtype", amp_dtype_name(o.amp_dtype)}};
}

// ZeRO in finetune: stages 1 to 3 on full fine-tuning's or LoRA's step (stage 3 in float32);
// what reads every full gradient (fp16's loss scaler) does not take it yet.
static void check_zero_options(const Options& o) {
  if (o.zero_stage == 0) return;
  ZENITH_CHECK(o.zero_stage >= 1 && o.zero_stage <= 3,
               "[finetune] --zero must be 0, 1, 2 or 3, got ", o.zero_stage);
  ZENITH_CHECK(o.zero_stage < 3 || o.amp == Amp::O0,
               "[finetune] --zero 3 trains float32 weights: drop --amp");
  // LoRA: the adapters and their AdamW state are sharded, the frozen base stays whole on every
  // rank. Stage 3 recomputes each layer's forward in backward: a dropout mask drawn anew there
  // would differ from the forward's.
  ZENITH_CHECK(o.zero_stage < 3 || o.method != Method::lora || o.lora.lora_dropout == 0,
               "[finetune] --zero 3 with --method lora recomputes each layer in backward: it "
               "needs --lora-dropout 0, got ",
               o.lora.lora_dropout);
  ZENITH_CHECK(o.mode == Mode::pynative, "[finetune] --zero runs in --mode pynative");
  ZENITH_CHECK(o.amp == Amp::O0 || o.amp_dtype != DType::f16,
               "[finetune] --zero with fp16 loss scaling is not supported: use --amp-dtype bf16");
}

// Tensor/pipeline parallelism in finetune: ParallelLlama's eager float32 or bf16 step; the
// head count's divisibility is ParallelLlama's check (it names the degree).
static void check_model_parallel_options(const Options& o) {
  ZENITH_CHECK(o.tensor_parallel >= 1 && o.pipeline_parallel >= 1 && o.micro_batches >= 1,
               "[finetune] --tensor-parallel, --pipeline-parallel and --micro-batches must be "
               "positive, got ",
               o.tensor_parallel, ", ", o.pipeline_parallel, ", ", o.micro_batches);
  ZENITH_CHECK(!o.sequence_parallel || o.tensor_parallel > 1,
               "[finetune] --sequence-parallel splits within a tensor group: it needs "
               "--tensor-parallel > 1");
  ZENITH_CHECK(!o.sequence_parallel || o.pad_to_multiple_of % o.tensor_parallel == 0,
               "[finetune] --sequence-parallel splits the positions over the tensor group: "
               "--pad-to-multiple-of ",
               o.pad_to_multiple_of, " must be a multiple of --tensor-parallel ",
               o.tensor_parallel);
  ZENITH_CHECK(o.batch_size % o.micro_batches == 0, "[finetune] --batch-size ", o.batch_size,
               " does not divide into --micro-batches ", o.micro_batches);
  if (o.tensor_parallel * o.pipeline_parallel == 1) return;
  // ZeRO 1 and 2 shard each tensor/pipeline shard over the mesh's data group; ZeRO 3 each
  // tensor shard (gathered per module over the data group; no stages).
  ZENITH_CHECK(o.zero_stage < 3 || o.pipeline_parallel == 1,
               "[finetune] --zero 3 with --pipeline-parallel is not supported: use --zero 1 or 2 "
               "(optimizer states and gradients sharded over the data ranks), or --zero 3 with "
               "--tensor-parallel alone");
  ZENITH_CHECK(o.zero_stage < 3 || o.micro_batches == 1,
               "[finetune] --zero 3 with --tensor-parallel runs the batch whole: --micro-batches ",
               o.micro_batches, " splits batches for --pipeline-parallel");
  ZENITH_CHECK(
      o.mode == Mode::pynative,
      "[finetune] --tensor-parallel/--pipeline-parallel run in --mode pynative, not graph");
  ZENITH_CHECK(o.amp == Amp::O0 || o.amp_dtype != DType::f16,
               "[finetune] --tensor-parallel/--pipeline-parallel with fp16 loss scaling is not "
               "supported: use --amp-dtype bf16");
  ZENITH_CHECK(o.accumulate_steps == 1,
               "[finetune] --accumulate-steps with --tensor-parallel/--pipeline-parallel: use "
               "--micro-batches to split the batch");
  ZENITH_CHECK(!o.activation_checkpointing || o.pipeline_parallel == 1,
               "[finetune] --activation-checkpointing with --pipeline-parallel is not supported");
}

void check_options(const Options& o) {
  ZENITH_CHECK(!o.model.empty() || (o.init == Init::random && !o.model_config.empty()),
               "[finetune] --model DIR is required (or --init random --model-config FILE)");
  ZENITH_CHECK(!o.out.empty(), "[finetune] --out DIR is required");
  ZENITH_CHECK(o.method != Method::lora || o.lora.r > 0,
               "[finetune] --lora-r must be positive, got ", o.lora.r);
  ZENITH_CHECK(o.lora.lora_dropout >= 0 && o.lora.lora_dropout < 1,
               "[finetune] --lora-dropout must be in [0, 1), got ", o.lora.lora_dropout);
  ZENITH_CHECK(o.batch_size > 0, "[finetune] --batch-size must be positive, got ", o.batch_size);
  ZENITH_CHECK(o.pad_to_multiple_of >= 0,
               "[finetune] --pad-to-multiple-of must be positive (0: the mode's default), got ",
               o.pad_to_multiple_of);
  ZENITH_CHECK(o.accumulate_steps > 0, "[finetune] --accumulate-steps must be positive, got ",
               o.accumulate_steps);
  ZENITH_CHECK(o.epochs > 0 || o.max_steps > 0, "[finetune] give --epochs N or --max-steps N");
  ZENITH_CHECK(o.lr > 0, "[finetune] --lr must be positive, got ", o.lr);
  ZENITH_CHECK(o.init == Init::pretrained || o.method == Method::full,
               "[finetune] --init random trains every weight: it needs --method full");
  ZENITH_CHECK(o.log_every > 0, "[finetune] --log-every must be positive, got ", o.log_every);
  ZENITH_CHECK(o.amp_dtype == DType::bf16 || o.amp_dtype == DType::f16,
               "[finetune] --amp-dtype must be bf16 or fp16, got ", dtype_name(o.amp_dtype));
  ZENITH_CHECK(o.mode == Mode::pynative || o.amp_dtype != DType::f16 || o.amp == Amp::O0,
               "[finetune] --mode graph has no fp16 loss scaling: use --amp-dtype bf16 or --mode "
               "pynative");
  check_zero_options(o);
  check_model_parallel_options(o);
}

}  // namespace detail
}  // namespace zenith::finetune
