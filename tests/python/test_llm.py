"""zenith.llm: the LLaMA family, tokenizers, LoRA (PEFT), generation, perplexity and fine-tuning
over the C++ core. Logits are checked against the committed PyTorch fixtures
(scripts/make_fixtures.py, tests/fixtures/llama) and generation/perplexity/tokenization against
the `zenith` command's --json output."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import zenith
from zenith import llm, nn

from conftest import SOURCE_DIR

FIXTURES = os.path.join(SOURCE_DIR, "tests", "fixtures", "llama")
DEMO = os.path.join(SOURCE_DIR, "examples", "llm", "demo-llama")
# The trained example (scripts/make_fortunes_llm.py); its generation_config.json samples.
FORTUNES = os.path.join(SOURCE_DIR, "examples", "llm", "fortunes-llama")
FINETUNE_DATA = os.path.join(SOURCE_DIR, "examples", "llm", "finetune")
TOLERANCE = 1e-4  # the fixtures' per-tensor max|x - ref| <= 1e-4 * max|ref|


def fixture(name):
    return os.path.join(FIXTURES, name)


def reference(name):
    tensors, _ = zenith._zenith.train.load_safetensors(os.path.join(fixture(name),
                                                                    "reference.safetensors"))
    return {k: v.asnumpy() for k, v in tensors.items()}


def scaled_error(x, ref, mask=None):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    if mask is not None:
        keep = np.asarray(mask).astype(bool)
        x, ref = x[keep], ref[keep]
    return np.abs(x - ref).max() / np.abs(ref).max()


def run_zenith(binary, *args):
    out = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# ---- the model


@pytest.mark.parametrize("case", ["llama_gqa", "llama3_tied", "qwen2_bias", "llama_bf16",
                                  "mistral_head_dim", "llama_rope_linear"])
def test_logits_equal_the_pytorch_fixture(case):
    ref = reference(case)
    model = llm.Llama.from_pretrained(fixture(case))
    assert isinstance(model, nn.Cell) and isinstance(model, llm.Llama)
    logits = model(zenith.Tensor(ref["input_ids"]))
    assert logits.shape == ref["logits"].shape and logits.dtype == zenith.float32
    assert scaled_error(logits.asnumpy(), ref["logits"]) <= TOLERANCE


def test_padded_batch_with_attention_mask_and_positions():
    ref = reference("llama_padding")
    model = llm.Llama.from_pretrained(fixture("llama_padding"))
    logits = model(ref["input_ids"], attention_mask=ref["attention_mask"],
                   position_ids=ref["position_ids"])
    assert scaled_error(logits.asnumpy(), ref["logits"], ref["attention_mask"]) <= TOLERANCE


def test_loss_and_gradients_equal_the_fixture():
    ref = reference("llama_gqa")
    model = llm.Llama.from_pretrained(fixture("llama_gqa"))
    names = [p.name for p in model.trainable_params()]
    assert "model.layers.0.self_attn.q_proj.weight" in names

    def forward(ids, labels):
        return llm.causal_lm_loss(model(ids), labels)

    grad_fn = zenith.value_and_grad(forward, None, model.trainable_params())
    loss, grads = grad_fn(zenith.Tensor(ref["input_ids"]), zenith.Tensor(ref["labels"]))
    assert abs(loss.asnumpy() - ref["loss"]) <= TOLERANCE * abs(ref["loss"])
    checked = 0
    for p, g in zip(model.trainable_params(), grads):
        key = "grad." + p.name
        if key in ref:
            assert scaled_error(g.asnumpy(), ref[key]) <= TOLERANCE, p.name
            checked += 1
    assert checked >= 10


def test_config_from_pretrained_and_dtype():
    config = llm.LlamaConfig.from_pretrained(DEMO)
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (64, 2, 2000)
    assert config.tie_word_embeddings and config.eos_token_ids == [2]
    assert json.loads(config.to_json_string())["num_key_value_heads"] == 2
    model = llm.Llama.from_pretrained(DEMO)
    assert model.dtype == "bfloat16"  # the file's dtype is kept
    assert llm.Llama.from_pretrained(DEMO, dtype=zenith.float32).dtype == "float32"
    assert llm.Llama.from_pretrained(DEMO, torch_dtype="float32").dtype == "float32"
    assert model.config.hidden_size == 64
    fresh = llm.Llama(config)  # transformers' initialisation, float32
    assert fresh.dtype == "float32" and fresh(np.array([[1, 2, 3]])).shape == (1, 3, 2000)


def test_save_pretrained_round_trip(tmp_path):
    model = llm.Llama.from_pretrained(fixture("llama_gqa"))
    ids = zenith.Tensor(reference("llama_gqa")["input_ids"])
    before = model(ids).asnumpy()
    model.save_pretrained(tmp_path / "copy")
    assert (tmp_path / "copy" / "config.json").exists()
    assert (tmp_path / "copy" / "model.safetensors").exists()
    again = llm.Llama.from_pretrained(tmp_path / "copy")
    np.testing.assert_array_equal(again(ids).asnumpy(), before)
    demo = llm.Llama.from_pretrained(DEMO)
    demo.save_pretrained(tmp_path / "demo")  # the tokenizer files come along
    assert (tmp_path / "demo" / "tokenizer.json").exists()


# ---- generation and perplexity = the zenith command's


def test_greedy_generate_equals_the_fixture():
    ref = reference("llama_gqa")
    model = llm.Llama.from_pretrained(fixture("llama_gqa"))
    prompt = ref["greedy.prompt"][0].tolist()
    expected = ref["greedy.tokens"][0].tolist()
    out = model.generate(prompt, max_new_tokens=len(expected), temperature=0, eos_token_id=[])
    assert out == prompt + expected
    as_tensor = model.generate(zenith.Tensor(ref["greedy.prompt"]), max_new_tokens=len(expected),
                               do_sample=False, eos_token_id=[])
    assert as_tensor.shape == (1, len(prompt) + len(expected))
    assert as_tensor.asnumpy()[0].tolist() == prompt + expected


def test_greedy_generate_equals_zenith_generate(zenith_binary):
    tokenizer = llm.Tokenizer.from_pretrained(DEMO)
    model = llm.Llama.from_pretrained(DEMO)
    prompt = tokenizer.encode("GNU General Public License")
    cli = run_zenith(zenith_binary, "generate", "--model", DEMO, "--prompt",
                     "GNU General Public License", "--temperature", "0", "--max-new-tokens",
                     "24", "--json")
    assert cli["prompt_tokens"] == len(prompt)
    out = model.generate(prompt, max_new_tokens=24, temperature=0, return_dict_in_generate=True)
    assert out["new_tokens"] == cli["tokens"]
    assert out["stop_reason"] == cli["stop_reason"]
    assert out["sequences"] == prompt + cli["tokens"]
    assert tokenizer.decode(out["new_tokens"], skip_special_tokens=True) == cli["text"]


def test_sampling_equals_zenith_generate(zenith_binary):
    model = llm.Llama.from_pretrained(DEMO)
    cli = run_zenith(zenith_binary, "generate", "--model", DEMO, "--prompt-ids", "1,45,67,89",
                     "--temperature", "0.9", "--top-k", "20", "--top-p", "0.9",
                     "--repetition-penalty", "1.2", "--seed", "7", "--max-new-tokens", "16",
                     "--json")
    out = model.generate([1, 45, 67, 89], max_new_tokens=16, temperature=0.9, top_k=20, top_p=0.9,
                         repetition_penalty=1.2, seed=7)
    assert out[4:] == cli["tokens"]
    other_seed = model.generate([1, 45, 67, 89], max_new_tokens=16, temperature=0.9, top_k=20,
                                top_p=0.9, repetition_penalty=1.2, seed=8)
    assert other_seed != out


def test_default_settings_are_the_models_as_in_zenith_generate(zenith_binary):
    # No generation_config.json: greedy, as transformers.
    model = llm.Llama.from_pretrained(DEMO)
    default = model.generate([1, 45, 67, 89], max_new_tokens=12, eos_token_id=[])
    assert default == model.generate([1, 45, 67, 89], max_new_tokens=12, temperature=0,
                                     eos_token_id=[])
    # generation_config.json samples (do_sample, temperature 0.7, top_k 40, top_p 0.9): Python and
    # the CLI draw the same tokens without a setting given, and those are not greedy's.
    with open(os.path.join(FORTUNES, "generation_config.json")) as f:
        assert json.load(f)["do_sample"] is True
    model = llm.Llama.from_pretrained(FORTUNES)
    prompt = llm.Tokenizer.from_pretrained(FORTUNES).encode("The meaning of life is")
    cli = run_zenith(zenith_binary, "generate", "--model", FORTUNES, "--prompt",
                     "The meaning of life is", "--max-new-tokens", "24", "--json")
    out = model.generate(prompt, max_new_tokens=24, return_dict_in_generate=True)
    assert out["new_tokens"] == cli["tokens"]
    greedy = model.generate(prompt, max_new_tokens=24, do_sample=False,
                            return_dict_in_generate=True)
    assert greedy["new_tokens"] != out["new_tokens"]
    cli_greedy = run_zenith(zenith_binary, "generate", "--model", FORTUNES, "--prompt",
                            "The meaning of life is", "--max-new-tokens", "24", "--temperature",
                            "0", "--json")
    assert cli_greedy["tokens"] == greedy["new_tokens"]


def test_a_hub_id_says_only_local_folders_are_read():
    with pytest.raises(zenith.Error, match="huggingface-cli download TinyLlama/TinyLlama-1.1B"):
        llm.Llama.from_pretrained("TinyLlama/TinyLlama-1.1B-Chat-v1.0")


def test_perplexity_equals_zenith_perplexity(zenith_binary):
    model = llm.Llama.from_pretrained(DEMO)
    ids = llm.Tokenizer.from_pretrained(DEMO).encode(
        "This License applies to any program or other work which contains a notice")
    cli = run_zenith(zenith_binary, "perplexity", "--model", DEMO, "--ids",
                     ",".join(map(str, ids)), "--max-seq-len", "8", "--json")
    out = llm.perplexity(model, ids, max_seq_len=8)
    assert out["tokens"] == cli["tokens"] == len(ids) - 1
    assert out["nll"] == pytest.approx(cli["nll"], rel=1e-12)
    assert out["perplexity"] == pytest.approx(np.exp(out["nll"]))


# ---- the tokenizer


def test_tokenizer_equals_zenith_tokenize(zenith_binary):
    tokenizer = llm.Tokenizer.from_pretrained(DEMO)
    text = "Everyone is permitted to copy and distribute verbatim copies."
    cli = run_zenith(zenith_binary, "tokenize", "--model", DEMO, "--text", text, "--json")
    ids = tokenizer.encode(text)
    assert ids == cli["ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == cli["tokens"]
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert tokenizer.decode(zenith.Tensor(np.array(ids)), skip_special_tokens=True) == text
    assert tokenizer(text)["input_ids"] == ids
    assert tokenizer.encode(text, add_special_tokens=False) == ids[1:]
    assert len(tokenizer) == tokenizer.vocab_size == 2000
    assert tokenizer.eos_token_id in tokenizer.eos_token_ids
    assert tokenizer.convert_tokens_to_ids(tokenizer.eos_token) == tokenizer.eos_token_id


def test_apply_chat_template():
    tokenizer = llm.Tokenizer.from_pretrained(DEMO)
    messages = [{"role": "user", "content": "Finish: the GNU"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                         chat_template="chatml")
    assert text == "<|im_start|>user\nFinish: the GNU<|im_end|>\n<|im_start|>assistant\n"
    text = tokenizer.apply_chat_template(messages, tokenize=False, chat_template="llama-2")
    assert text.startswith("<s>[INST] Finish: the GNU [/INST]")
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                        chat_template="llama-2")
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    assert decoded.strip() == "[INST] Finish: the GNU [/INST]"
    with pytest.raises(ValueError, match="message 0"):
        tokenizer.apply_chat_template(["hi"])
    with pytest.raises(ValueError, match="llama-3"):  # the error lists the known templates
        tokenizer.apply_chat_template(messages, chat_template="nope")


# ---- LoRA (PEFT)


def test_peft_adapter_equals_the_fixture_merged_and_unmerged():
    ref = reference("lora_qv")
    model = llm.Llama.from_pretrained(fixture("llama_gqa")).load_adapter(fixture("lora_qv"))
    assert model.peft_config.r == 4 and sorted(model.peft_config.target_modules) == [
        "q_proj", "v_proj"]
    ids = zenith.Tensor(ref["input_ids"])
    assert scaled_error(model(ids).asnumpy(), ref["logits"]) <= TOLERANCE
    model.merge_and_unload()
    assert model.peft_config is None
    assert not any("lora_" in p.name for p in model.get_parameters())
    assert scaled_error(model(ids).asnumpy(), ref["merged.logits"]) <= TOLERANCE
    q = model.parameters_dict()["model.layers.0.self_attn.q_proj.weight"].asnumpy()
    assert scaled_error(q, ref["merged.model.layers.0.self_attn.q_proj.weight"]) <= TOLERANCE


def test_lora_step_from_python_changes_only_the_adapters():
    ref = reference("llama_gqa")
    model = llm.Llama.from_pretrained(fixture("llama_gqa"))
    config = llm.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    assert llm.get_peft_model(model, config) is model
    trainable = model.trainable_params()
    assert trainable and all(".lora_A." in p.name or ".lora_B." in p.name for p in trainable)
    assert len(trainable) == 2 * 2 * 2  # 2 layers x (q, v) x (A, B)
    before = {n: p.asnumpy().copy() for n, p in model.parameters_and_names()}
    optimizer = nn.AdamW(trainable, learning_rate=1e-2)

    def forward(ids, labels):
        return llm.causal_lm_loss(model(ids), labels)

    grad_fn = zenith.value_and_grad(forward, None, optimizer.parameters)
    losses = []
    for _ in range(3):
        loss, grads = grad_fn(zenith.Tensor(ref["input_ids"]), zenith.Tensor(ref["labels"]))
        optimizer(grads)
        losses.append(float(loss.asnumpy()))
    assert losses[-1] < losses[0]
    for name, p in model.parameters_and_names():
        changed = not np.array_equal(p.asnumpy(), before[name])
        assert changed == (".lora_" in name), name


def test_adapter_files_round_trip(tmp_path):
    ref = reference("llama_gqa")
    ids = zenith.Tensor(ref["input_ids"])
    model = llm.get_peft_model(llm.Llama.from_pretrained(fixture("llama_gqa")),
                               llm.LoraConfig(r=2, lora_alpha=4, target_modules="all-linear",
                                              use_rslora=True))
    for p in model.trainable_params():  # make the adapters do something (B starts at zero)
        p.set_data(zenith.Tensor(np.full(p.shape, 0.01, np.float32)))
    adapted = model(ids).asnumpy()
    model.save_adapter(tmp_path / "adapter")
    written = json.load(open(tmp_path / "adapter" / "adapter_config.json"))
    assert written["peft_type"] == "LORA" and written["r"] == 2 and written["use_rslora"]
    assert written["target_modules"] == "all-linear"
    assert written["base_model_name_or_path"] == fixture("llama_gqa")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").exists()
    loaded = llm.Llama.from_pretrained(fixture("llama_gqa")).load_adapter(tmp_path / "adapter")
    np.testing.assert_allclose(loaded(ids).asnumpy(), adapted, rtol=1e-6, atol=1e-6)
    assert loaded.peft_config.target_modules == "all-linear"
    assert llm.LoraConfig.from_pretrained(tmp_path / "adapter").lora_alpha == 4


# ---- fine-tuning = zenith finetune


def test_finetune_writes_a_peft_adapter(tmp_path):
    lines = []
    result = llm.finetune(model=DEMO, data=os.path.join(FINETUNE_DATA, "train.jsonl"),
                          eval_data=os.path.join(FINETUNE_DATA, "eval.jsonl"),
                          out=str(tmp_path / "run"), max_steps=3, lora_r=4,
                          lora_targets=["q_proj", "v_proj"], lr=3e-3, batch_size=4,
                          log=lines.append)
    assert result["steps"] == 3 and len(result["losses"]) == 3
    assert 0 < result["trainable_parameters"] < result["total_parameters"]
    assert [e["step"] for e in result["evals"]] == [0, 3]
    assert any("step" in line for line in lines)
    assert (tmp_path / "run" / "adapter_config.json").exists()
    assert (tmp_path / "run" / "metrics.jsonl").exists()
    model = llm.Llama.from_pretrained(DEMO).load_adapter(tmp_path / "run")
    assert model.peft_config.r == 4


def test_finetune_checkpointing_policy(tmp_path):
    def run(policy, out):
        lines = []
        result = llm.finetune(model=DEMO, data=os.path.join(FINETUNE_DATA, "train.jsonl"),
                              out=str(tmp_path / out), max_steps=2, batch_size=4,
                              activation_checkpointing=policy is not None,
                              activation_checkpointing_policy=policy or "selective",
                              log=lines.append)
        return result["losses"], lines
    plain, _ = run(None, "plain")
    for policy in ("selective", "full", "gate_proj,attention"):
        losses, lines = run(policy, policy.replace(",", "_"))
        np.testing.assert_allclose(losses, plain, rtol=1e-6)
        assert any("activation checkpointing per decoder layer, " + policy.split(",")[0] in line
                   for line in lines), lines
    with pytest.raises(zenith.Error, match="unknown 'qkv'"):
        run("qkv", "bad")


def test_finetune_graph_mode_pads_batches(tmp_path):
    # The demo's examples have many lengths: graph mode pads batches to a multiple of 64 tokens
    # (a few graphs), pynative mode padded alike trains the same steps.
    def run(mode, pad, out):
        lines = []
        result = llm.finetune(model=DEMO, data=os.path.join(FINETUNE_DATA, "train.jsonl"),
                              out=str(tmp_path / out), max_steps=4, batch_size=4, mode=mode,
                              pad_to_multiple_of=pad, log=lines.append)
        return result["losses"], lines
    graph, lines = run("graph", 0, "graph")
    captures = sum(line.startswith("graph: ") for line in lines)
    assert 1 <= captures <= 4, lines
    assert any("padded to a multiple of 64 tokens" in line for line in lines), lines
    eager, lines = run("pynative", 64, "eager")
    assert not any(line.startswith("graph: ") for line in lines)
    np.testing.assert_allclose(graph, eager, rtol=1e-5)
    with pytest.raises(zenith.Error, match="pad-to-multiple-of must be positive"):
        run("pynative", -1, "bad")


def test_finetune_arguments_are_checked(tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'lora_rank'.*lora_r"):
        llm.finetune(model=DEMO, data="x.jsonl", out=str(tmp_path), lora_rank=4)
    with pytest.raises(TypeError, match="max_steps"):
        llm.finetune(model=DEMO, data="x.jsonl", out=str(tmp_path), max_steps="ten")
    with pytest.raises(ValueError, match="data=FILE.jsonl"):
        llm.finetune(model=DEMO, out=str(tmp_path))
    with pytest.raises(zenith.Error, match="missing.jsonl"):
        llm.finetune(model=DEMO, data=str(tmp_path / "missing.jsonl"), out=str(tmp_path / "o"),
                     log=None)


# ---- bad input: Python exceptions with the C++ message


def test_errors_carry_the_cpp_message(tmp_path):
    with pytest.raises(zenith.Error, match="nowhere") as e:
        llm.Llama.from_pretrained(tmp_path / "nowhere")
    assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError)
    with pytest.raises(zenith.Error, match="nowhere"):
        llm.Tokenizer.from_pretrained(tmp_path / "nowhere")
    model = llm.Llama.from_pretrained(DEMO)
    with pytest.raises(ValueError, match="2000"):  # an id outside the vocabulary
        model.generate([1, 5000], max_new_tokens=2)
    with pytest.raises(ValueError, match="empty"):
        model.generate([], max_new_tokens=2)
    with pytest.raises(TypeError, match="ints"):
        model.generate([1, "a"])
    with pytest.raises(TypeError, match="integers"):
        model.generate(zenith.Tensor(np.array([1.0, 2.0])))
    with pytest.raises(TypeError, match="None"):
        llm.perplexity(model, None)
    with pytest.raises(ValueError, match="at least 2|2 ids|two"):
        llm.perplexity(model, [1])
    with pytest.raises(zenith.Error, match="attn.*q_proj|q_proj.*attn"):
        llm.get_peft_model(model, llm.LoraConfig(target_modules=["attn"]))
    with pytest.raises(ValueError, match="r must be a positive int"):
        llm.get_peft_model(model, llm.LoraConfig(r=0))
    with pytest.raises(TypeError, match="zenith.llm.Llama"):
        llm.get_peft_model(nn.Dense(2, 2), llm.LoraConfig())
    with pytest.raises(ValueError, match="no LoRA adapters"):
        model.save_adapter(tmp_path / "a")
    with pytest.raises(zenith.Error, match=r"shape \[32, 4\]"):  # an adapter for another base
        llm.Llama.from_pretrained(fixture("mistral_head_dim")).load_adapter(fixture("lora_qv"))
    with pytest.raises(zenith.Error, match="input_ids|vocab"):
        model(np.array([[1, 2, 99999]]))


def test_import_zenith_does_not_load_the_tokenizer_libraries(python_env):
    # libsentencepiece's protobuf symbols must stay out of processes that never use zenith.llm.
    code = ("import sys, zenith; assert 'zenith._zenith_llm' not in sys.modules; "
            "zenith.llm.Tokenizer; assert 'zenith._zenith_llm' not in sys.modules; "
            "zenith.llm.LlamaConfig; assert 'zenith._zenith_llm' in sys.modules")
    subprocess.run([sys.executable, "-c", code], env=python_env, check=True, timeout=60)


def test_model_helpers():
    model = llm.Llama.from_pretrained(fixture("llama_gqa"))
    names = model.linear_layer_names()
    assert names[0] == "model.layers.0.self_attn.q_proj" and names[-1] == "lm_head"
    ids = zenith.Tensor(reference("llama_gqa")["input_ids"])
    plain = model.forward(ids).asnumpy()
    np.testing.assert_array_equal(model.construct(ids).asnumpy(), plain)
    assert model.name_or_path == fixture("llama_gqa")
    model.gradient_checkpointing_enable()  # recomputes in backward: the same loss and gradients
    loss_fn = zenith.value_and_grad(lambda x: model(x).sum(), None, model.trainable_params()[:1])
    loss, (g,) = loss_fn(ids)
    np.testing.assert_allclose(float(loss.asnumpy()), plain.sum(), rtol=1e-5)
    assert g.shape == model.trainable_params()[0].shape
    assert llm.AutoModelForCausalLM is llm.Llama and llm.AutoTokenizer is llm.Tokenizer
    assert "LoraConfig(r=8" in repr(llm.LoraConfig())
    assert json.loads(llm.LoraConfig(r=3).to_json_string())["r"] == 3
    config = llm.LlamaConfig.from_pretrained(DEMO)
    config.num_hidden_layers = 1
    assert json.loads(config.to_json_string())["num_hidden_layers"] == 1


def test_tokenizer_properties():
    tokenizer = llm.Tokenizer.from_pretrained(DEMO)
    assert tokenizer.bos_token == "<s>" and tokenizer.eos_token == "</s>"
    assert tokenizer.unk_token_id == 0 and tokenizer.pad_token_id in (None, 0)
    assert isinstance(tokenizer.chat_template, str)
    assert "Tokenizer(" in repr(tokenizer)


def test_config_fields_are_config_json():
    config = llm.LlamaConfig.from_pretrained(DEMO)
    assert (config.architecture, config.model_type, config.hidden_act) == (
        "LlamaForCausalLM", "llama", "silu")
    assert (config.head_dim, config.intermediate_size, config.max_position_embeddings) == (
        16, 176, 256)
    assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
    assert config.rms_norm_eps == 1e-5 and config.rope_theta == 10000.0
    assert config.torch_dtype == "bfloat16" and config.bos_token_id == 1
    assert config.pad_token_id is None
    assert config.attention_bias is False and config.mlp_bias is False
    again = llm.LlamaConfig.from_json_string(config.to_json_string())
    assert again.to_json_string() == config.to_json_string()
    with pytest.raises(zenith.Error, match="hidden_size"):
        llm.LlamaConfig.from_json_string('{"architectures": ["LlamaForCausalLM"], '
                                         '"hidden_size": "big"}', "bad.json")
