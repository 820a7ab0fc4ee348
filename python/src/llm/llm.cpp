// The _zenith_llm extension module: the LLaMA family (models::Llama), its tokenizers
// (zenith_text), LoRA adapters, generation, perplexity and fine-tuning for zenith.llm.
//
// A module of its own, loaded only when zenith.llm first needs it: it links zenith_text, whose
// Debian libsentencepiece exports protobuf symbols that crash a process that also loads
// libprotobuf (onnx, the protobuf Python package), so `import zenith` must not load it. Tensors
// and cells are the _zenith module's classes (pybind11 shares registered types between modules),
// and zenith::Error becomes zenith.Error through _zenith's exception translator.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "zenith/finetune.h"
#include "zenith/llama.h"
#include "zenith/text.h"

namespace py = pybind11;

namespace zenith::python {
namespace {

using ReleaseGIL = py::call_guard<py::gil_scoped_release>;

models::Llama& llama(nn::Cell& cell) {
  auto* model = dynamic_cast<models::Llama*>(&cell);
  if (!model) throw py::type_error("[llm] expected a zenith.llm.Llama, got a " + cell.type_name());
  return *model;
}

// None, a zenith dtype or its name ("bfloat16").
std::optional<DType> dtype_or_none(const py::object& value) {
  if (value.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(value)) return dtype_from_name(value.cast<std::string>());
  return value.cast<DType>();
}

py::dict generation_dict(const models::GenerationResult& r) {
  py::dict out;
  out["tokens"] = r.tokens;
  out["stop_reason"] = r.stop_reason;
  return out;
}

void bind_config(py::module_& m) {
  py::class_<models::LlamaConfig>(
      m, "LlamaConfig",
      "A LLaMA-family config.json (transformers' LlamaConfig, MistralConfig, Qwen2Config): "
      "LlamaConfig.from_pretrained(dir or config.json), to_json_string(), save_pretrained(dir); "
      "the fields by their config.json names (eos_token_ids: eos_token_id as a list).")
      .def(py::init<>())
      .def_static("from_pretrained", &models::load_llama_config, py::arg("path"))
      .def_static("from_json_string", &models::parse_llama_config, py::arg("text"),
                  py::arg("source") = "<string>")
      .def("to_json_string", &models::llama_config_json)
      .def("save_pretrained", [](const models::LlamaConfig& c,
                                 const std::string& path) { models::save_llama_config(path, c); })
      .def_readwrite("architecture", &models::LlamaConfig::architecture)
      .def_readwrite("model_type", &models::LlamaConfig::model_type)
      .def_readwrite("vocab_size", &models::LlamaConfig::vocab_size)
      .def_readwrite("hidden_size", &models::LlamaConfig::hidden_size)
      .def_readwrite("intermediate_size", &models::LlamaConfig::intermediate_size)
      .def_readwrite("num_hidden_layers", &models::LlamaConfig::num_hidden_layers)
      .def_readwrite("num_attention_heads", &models::LlamaConfig::num_attention_heads)
      .def_readwrite("num_key_value_heads", &models::LlamaConfig::num_key_value_heads)
      .def_readwrite("head_dim", &models::LlamaConfig::head_dim)
      .def_readwrite("max_position_embeddings", &models::LlamaConfig::max_position_embeddings)
      .def_readwrite("rms_norm_eps", &models::LlamaConfig::rms_norm_eps)
      .def_readwrite("rope_theta", &models::LlamaConfig::rope_theta)
      .def_readwrite("tie_word_embeddings", &models::LlamaConfig::tie_word_embeddings)
      .def_readwrite("attention_bias", &models::LlamaConfig::attention_bias)
      .def_readwrite("mlp_bias", &models::LlamaConfig::mlp_bias)
      .def_readwrite("hidden_act", &models::LlamaConfig::hidden_act)
      .def_readwrite("torch_dtype", &models::LlamaConfig::torch_dtype)
      .def_readwrite("bos_token_id", &models::LlamaConfig::bos_token_id)
      .def_readwrite("eos_token_ids", &models::LlamaConfig::eos_token_ids)
      .def_readwrite("pad_token_id", &models::LlamaConfig::pad_token_id);
}

void bind_model(py::module_& m) {
  m.def(
      "llama_new",
      [](const models::LlamaConfig& config, const py::object& dtype) {
        const DType d = dtype_or_none(dtype).value_or(DType::f32);
        py::gil_scoped_release release;
        return nn::CellPtr(std::make_shared<models::Llama>(config, d));
      },
      py::arg("config"), py::arg("dtype") = py::none());
  m.def(
      "llama_from_pretrained",
      [](const std::string& dir, const py::object& dtype) {
        const std::optional<DType> d = dtype_or_none(dtype);
        py::gil_scoped_release release;
        return nn::CellPtr(models::Llama::from_pretrained(dir, d));
      },
      py::arg("dir"), py::arg("dtype") = py::none());
  m.def(
      "save_pretrained",
      [](nn::Cell& cell, const std::string& dir, uint64_t max_shard_bytes) {
        llama(cell).save_pretrained(dir, max_shard_bytes);
      },
      ReleaseGIL(), py::arg("model"), py::arg("dir"),
      py::arg("max_shard_bytes") = io::kHfDefaultMaxShardBytes);
  m.def("copy_model_side_files", &models::copy_model_side_files, ReleaseGIL());
  m.def("config", [](nn::Cell& cell) { return llama(cell).config(); });
  m.def("weight_dtype", [](nn::Cell& cell) { return dtype_name(llama(cell).weight_dtype()); });
  m.def(
      "forward",
      [](nn::Cell& cell, const Tensor& input_ids, const std::optional<Tensor>& attention_mask,
         const std::optional<Tensor>& position_ids) {
        models::LlamaInput input{.input_ids = input_ids,
                                 .attention_mask = attention_mask.value_or(Tensor()),
                                 .position_ids = position_ids.value_or(Tensor())};
        return llama(cell).forward(input);
      },
      ReleaseGIL(), py::arg("model"), py::arg("input_ids"), py::arg("attention_mask") = py::none(),
      py::arg("position_ids") = py::none());
  m.def("freeze_base", [](nn::Cell& cell, bool frozen) { llama(cell).freeze_base(frozen); });
  m.def("set_activation_checkpointing",
        [](nn::Cell& cell, bool on) { llama(cell).set_activation_checkpointing(on); });
  m.def("linear_layer_names", [](nn::Cell& cell) {
    std::vector<std::string> names;
    for (const auto& [path, layer] : llama(cell).linear_layers()) names.push_back(path);
    return names;
  });
  m.def("causal_lm_loss",
        static_cast<Tensor (*)(const Tensor&, const Tensor&)>(&models::causal_lm_loss),
        ReleaseGIL(), py::arg("logits"), py::arg("labels"));
  m.def(
      "generation_eos_ids",
      [](const nn::CellPtr& cell, const std::shared_ptr<text::Tokenizer>& tokenizer) {
        return text::generation_eos_ids(llama(*cell).config().eos_token_ids, tokenizer.get());
      },
      py::arg("model"), py::arg("tokenizer") = py::none());
  m.def(
      "generate",
      [](nn::Cell& cell, const std::vector<int64_t>& prompt,
         const models::GenerationConfig& config) {
        models::GenerationResult r;
        {
          py::gil_scoped_release release;
          r = models::generate(llama(cell), prompt, config);
        }
        return generation_dict(r);
      },
      py::arg("model"), py::arg("prompt"), py::arg("config"));
  m.def(
      "perplexity",
      [](nn::Cell& cell, const std::vector<int64_t>& ids, int64_t max_seq_len) {
        models::PerplexityResult r;
        {
          py::gil_scoped_release release;
          r = models::perplexity(llama(cell), ids, max_seq_len);
        }
        py::dict out;
        out["nll"] = r.nll;
        out["perplexity"] = r.perplexity;
        out["tokens"] = r.tokens;
        return out;
      },
      py::arg("model"), py::arg("ids"), py::arg("max_seq_len") = 0);

  m.def(
      "resolve_generation_config",
      [](const std::string& model_dir, std::optional<int64_t> max_new_tokens,
         std::optional<double> temperature, std::optional<int64_t> top_k,
         std::optional<double> top_p, std::optional<double> repetition_penalty,
         std::optional<bool> do_sample, std::optional<uint64_t> seed) {
        return models::resolve_generation_config(model_dir,
                                                 {.max_new_tokens = max_new_tokens,
                                                  .temperature = temperature,
                                                  .top_k = top_k,
                                                  .top_p = top_p,
                                                  .repetition_penalty = repetition_penalty,
                                                  .do_sample = do_sample,
                                                  .seed = seed});
      },
      py::arg("model_dir"), py::arg("max_new_tokens") = py::none(),
      py::arg("temperature") = py::none(), py::arg("top_k") = py::none(),
      py::arg("top_p") = py::none(), py::arg("repetition_penalty") = py::none(),
      py::arg("do_sample") = py::none(), py::arg("seed") = py::none());
  py::class_<models::GenerationConfig>(m, "GenerationConfig")
      .def(py::init<>())
      .def_readwrite("max_new_tokens", &models::GenerationConfig::max_new_tokens)
      .def_readwrite("temperature", &models::GenerationConfig::temperature)
      .def_readwrite("top_k", &models::GenerationConfig::top_k)
      .def_readwrite("top_p", &models::GenerationConfig::top_p)
      .def_readwrite("repetition_penalty", &models::GenerationConfig::repetition_penalty)
      .def_readwrite("seed", &models::GenerationConfig::seed)
      .def_readwrite("eos_token_ids", &models::GenerationConfig::eos_token_ids);
}

void bind_lora(py::module_& m) {
  py::class_<io::LoraConfig>(m, "LoraConfig")
      .def(py::init<>())
      .def_static("from_pretrained", &io::read_lora_config, py::arg("path"))
      .def("to_json_string", &io::lora_config_json)
      .def_readwrite("r", &io::LoraConfig::r)
      .def_readwrite("lora_alpha", &io::LoraConfig::lora_alpha)
      .def_readwrite("target_modules", &io::LoraConfig::target_modules)
      .def_readwrite("target_regex", &io::LoraConfig::target_regex)
      .def_readwrite("all_linear", &io::LoraConfig::all_linear)
      .def_readwrite("lora_dropout", &io::LoraConfig::lora_dropout)
      .def_readwrite("bias", &io::LoraConfig::bias)
      .def_readwrite("use_rslora", &io::LoraConfig::use_rslora)
      .def_readwrite("task_type", &io::LoraConfig::task_type)
      .def_readwrite("base_model_name_or_path", &io::LoraConfig::base_model_name_or_path)
      .def_readwrite("inference_mode", &io::LoraConfig::inference_mode)
      .def_readwrite("layers_to_transform", &io::LoraConfig::layers_to_transform)
      .def("scaling", &io::LoraConfig::scaling);
  m.def(
      "add_lora",
      [](nn::Cell& cell, const io::LoraConfig& config) {
        return models::add_lora(llama(cell), config);
      },
      ReleaseGIL());
  m.def(
      "load_lora",
      [](nn::Cell& cell, const std::string& dir) { models::load_lora(llama(cell), dir); },
      ReleaseGIL());
  m.def(
      "save_lora",
      [](nn::Cell& cell, const io::LoraConfig& config, const std::string& dir) {
        models::save_lora(llama(cell), config, dir);
      },
      ReleaseGIL());
  m.def(
      "merge_lora", [](nn::Cell& cell) { return models::merge_lora(llama(cell)); }, ReleaseGIL());
}

void bind_tokenizer(py::module_& m) {
  auto id_or_none = [](int32_t id) -> std::optional<int32_t> {
    if (id < 0) return std::nullopt;
    return id;
  };
  py::class_<text::Tokenizer, std::shared_ptr<text::Tokenizer>>(m, "Tokenizer")
      .def_static("from_dir", &text::Tokenizer::from_dir, ReleaseGIL(), py::arg("dir"))
      .def_static("find_in_dir", &text::Tokenizer::find_in_dir, ReleaseGIL(), py::arg("dir"))
      .def(
          "encode",
          [](const text::Tokenizer& t, const std::string& s, bool add_special) {
            return t.encode(s, add_special);
          },
          ReleaseGIL(), py::arg("text"), py::arg("add_special_tokens") = true)
      .def(
          "decode",
          [](const text::Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
            return t.decode(ids, skip_special);
          },
          ReleaseGIL(), py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def("apply_chat_template",
           [](const text::Tokenizer& t, const std::vector<std::pair<std::string, std::string>>& m,
              bool add_generation_prompt, const std::string& template_name, bool tokenize) {
             std::vector<text::ChatMessage> messages;
             for (const auto& [role, content] : m) messages.push_back({role, content});
             auto chat = text::ChatTemplate::for_tokenizer(t, template_name);
             py::dict out;
             if (tokenize)
               out["ids"] = text::encode_chat(t, chat, messages, add_generation_prompt).ids;
             else
               out["text"] = chat.render(messages, add_generation_prompt);
             return out;
           })
      .def_property_readonly("vocab_size", &text::Tokenizer::vocab_size)
      .def("id_to_piece", &text::Tokenizer::id_to_piece)
      .def("piece_to_id", &text::Tokenizer::piece_to_id)
      .def_property_readonly("bos_token_id",
                             [=](const text::Tokenizer& t) { return id_or_none(t.bos_id()); })
      .def_property_readonly("eos_token_id",
                             [=](const text::Tokenizer& t) { return id_or_none(t.eos_id()); })
      .def_property_readonly("pad_token_id",
                             [=](const text::Tokenizer& t) { return id_or_none(t.pad_id()); })
      .def_property_readonly("unk_token_id",
                             [=](const text::Tokenizer& t) { return id_or_none(t.unk_id()); })
      .def_property_readonly("eos_token_ids", &text::Tokenizer::eos_ids)
      .def_property_readonly("bos_token", &text::Tokenizer::bos_token)
      .def_property_readonly("eos_token", &text::Tokenizer::eos_token)
      .def_property_readonly("chat_template", &text::Tokenizer::chat_template)
      .def_property_readonly("kind", &text::Tokenizer::kind);
  m.def("chat_template_names", &text::ChatTemplate::names);
}

// `zenith finetune`'s run: the options' data files read with the model's tokenizer, then
// finetune::run; `log` (a Python callable, or None) receives the lines the command prints.
py::dict run_finetune(const finetune::Options& o, py::object log) {
  finetune::Result r;
  {
    py::gil_scoped_release release;
    const models::LlamaConfig config = models::load_llama_config(finetune::model_config_path(o));
    auto tokenizer = text::Tokenizer::find_in_dir(o.model);
    const finetune::DataOptions data_options = finetune::data_options(o, config);
    const finetune::Data train = finetune::load_data(o.data, tokenizer.get(), data_options);
    std::optional<finetune::Data> eval;
    if (!o.eval_data.empty())
      eval = finetune::load_data(o.eval_data, tokenizer.get(), data_options);
    std::function<void(const std::string&)> print;
    if (!log.is_none())
      print = [&log](const std::string& line) {
        py::gil_scoped_acquire gil;
        log(line);
      };
    r = finetune::run(o, train, eval ? &*eval : nullptr, print);
  }
  py::dict out;
  out["steps"] = r.steps;
  out["trainable_parameters"] = r.trainable_parameters;
  out["total_parameters"] = r.total_parameters;
  out["losses"] = r.losses;
  out["grad_norms"] = r.grad_norms;
  py::list evals;
  for (const auto& e : r.evals) {
    py::dict d;
    d["step"] = e.step;
    d["loss"] = e.loss;
    d["perplexity"] = e.perplexity;
    d["targets"] = e.targets;
    evals.append(d);
  }
  out["evals"] = evals;
  out["spikes"] = r.spikes;
  out["rollbacks"] = r.rollbacks;
  return out;
}

// A typed choice of finetune::Options seen from Python as its name ("lora", "graph", ...).
template <typename E>
void def_choice(py::class_<finetune::Options>& c, const char* name, E finetune::Options::*field,
                E (*parse)(const std::string&)) {
  c.def_property(
      name, [field](const finetune::Options& o) { return std::string(finetune::name(o.*field)); },
      [field, parse](finetune::Options& o, const std::string& s) { o.*field = parse(s); });
}

void bind_finetune(py::module_& m) {
  using O = finetune::Options;
  py::class_<O> c(m, "FinetuneOptions");
  c.def(py::init<>())
      .def_readwrite("model", &O::model)
      .def_readwrite("data", &O::data)
      .def_readwrite("eval_data", &O::eval_data)
      .def_readwrite("out", &O::out)
      .def_readwrite("model_config", &O::model_config)
      .def_property(
          "lora_r", [](const O& o) { return o.lora.r; }, [](O& o, int64_t v) { o.lora.r = v; })
      .def_property(
          "lora_alpha", [](const O& o) { return o.lora.lora_alpha; },
          [](O& o, double v) { o.lora.lora_alpha = v; })
      .def_property(
          "lora_dropout", [](const O& o) { return o.lora.lora_dropout; },
          [](O& o, double v) { o.lora.lora_dropout = v; })
      .def_property(
          "lora_targets", [](const O& o) { return finetune::lora_targets(o.lora); },
          [](O& o, const std::string& v) { finetune::set_lora_targets(o.lora, v); })
      .def_property(
          "use_rslora", [](const O& o) { return o.lora.use_rslora; },
          [](O& o, bool v) { o.lora.use_rslora = v; })
      .def_readwrite("epochs", &O::epochs)
      .def_readwrite("max_steps", &O::max_steps)
      .def_readwrite("lr", &O::lr)
      .def_readwrite("weight_decay", &O::weight_decay)
      .def_readwrite("clip_grad_norm", &O::clip_grad_norm)
      .def_readwrite("warmup_steps", &O::warmup_steps)
      .def_readwrite("batch_size", &O::batch_size)
      .def_readwrite("accumulate_steps", &O::accumulate_steps)
      .def_readwrite("max_seq_len", &O::max_seq_len)
      .def_readwrite("train_on_prompt", &O::train_on_prompt)
      .def_readwrite("packing", &O::packing)
      .def_readwrite("pad_to_multiple_of", &O::pad_to_multiple_of)
      .def_readwrite("chat_template", &O::chat_template)
      .def_readwrite("activation_checkpointing", &O::activation_checkpointing)
      .def_readwrite("activation_checkpointing_policy", &O::activation_checkpointing_policy)
      .def_readwrite("seed", &O::seed)
      .def_readwrite("log_every", &O::log_every)
      .def_readwrite("eval_steps", &O::eval_steps)
      .def_readwrite("save_every", &O::save_every)
      .def_readwrite("resume", &O::resume)
      .def_readwrite("spike_factor", &O::spike_factor)
      .def_readwrite("spike_rollback", &O::spike_rollback);
  def_choice(c, "method", &O::method, finetune::parse_method);
  def_choice(c, "init", &O::init, finetune::parse_init);
  def_choice(c, "schedule", &O::schedule, finetune::parse_schedule);
  def_choice(c, "mode", &O::mode, finetune::parse_mode);
  m.def("finetune", &run_finetune, py::arg("options"), py::arg("log") = py::none());
}

}  // namespace
}  // namespace zenith::python

PYBIND11_MODULE(_zenith_llm, m) {
  namespace zp = zenith::python;
  m.doc() = "The LLaMA family, tokenizers, LoRA and fine-tuning (use zenith.llm).";
  py::module_::import("zenith._zenith");  // the Tensor and Cell classes, zenith.Error
  zp::bind_config(m);
  zp::bind_model(m);
  zp::bind_lora(m);
  zp::bind_tokenizer(m);
  zp::bind_finetune(m);
}
