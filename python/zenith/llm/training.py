"""zenith.llm.finetune: `zenith finetune` from Python (LoRA or full supervised fine-tuning on
JSONL data), its command-line options as keyword arguments."""

from zenith.llm._ext import ext

__all__ = ["finetune"]


def finetune(log=print, **options):
    """Fine-tunes a LLaMA-family model directory as `zenith finetune` does and returns
    {'steps', 'losses', 'grad_norms', 'evals', 'trainable_parameters', 'total_parameters',
    'spikes', 'rollbacks'}.

    Keyword arguments are the command's flags with underscores: model (directory), data
    (JSONL), out (directory), eval_data, method ('lora' or 'full'), init, model_config,
    lora_r, lora_alpha, lora_dropout, lora_targets ('q_proj,v_proj', a list, or 'all-linear'),
    use_rslora, epochs, max_steps, lr, weight_decay, clip_grad_norm, schedule, warmup_steps,
    batch_size, accumulate_steps, max_seq_len, train_on_prompt, packing, pad_to_multiple_of (0:
    the mode's default), chat_template, activation_checkpointing, activation_checkpointing_policy
    ('full', 'selective' or a comma list of what each layer keeps), mode ('pynative' or 'graph'),
    seed, log_every, eval_steps, save_every, resume, spike_factor, spike_rollback. log: called
    with each line the command prints (None: silent).

        zenith.llm.finetune(model="examples/llm/demo-llama", data="train.jsonl", out="run",
                            max_steps=20, lora_r=8)     # run/adapter_config.json, ...
    """
    o = ext().FinetuneOptions()
    known = sorted(n for n in dir(o) if not n.startswith("_"))
    for name, value in options.items():
        if name not in known:
            raise TypeError(f"finetune() got an unexpected keyword argument {name!r}; known: "
                            f"{', '.join(known)}")
        if name == "lora_targets" and isinstance(value, (list, tuple)):
            value = ",".join(value)
        try:
            setattr(o, name, value)
        except TypeError:
            raise TypeError(f"finetune(): {name}={value!r} has the wrong type (expected "
                            f"{type(getattr(o, name)).__name__})") from None
    if not (o.model or o.model_config) or not o.data or not o.out:
        raise ValueError("[finetune] model=DIR (or init='random', model_config=FILE), "
                         "data=FILE.jsonl and out=DIR are required")
    return ext().finetune(o, log)
