"""zenith.llm.Llama: the LLaMA family (LLaMA 1/2/3.x, TinyLlama, SmolLM, Mistral, Qwen2) as a
zenith.nn.Cell over the C++ models::Llama, with Hugging Face's parameter names."""

from zenith._tensor import Tensor, _as_tensor, int64
from zenith.llm._ext import ext, ids_list
from zenith.nn.layers import _Builtin, _make

__all__ = ["Llama", "perplexity", "causal_lm_loss"]


class Llama(_Builtin):
    """A LLaMA-family causal language model (transformers' LlamaForCausalLM and relatives).

    Llama(config, dtype=None): random weights as transformers initialises them, from a
    zenith.llm.LlamaConfig; Llama.from_pretrained(dir, dtype=None): an HF model directory
    (config.json, model.safetensors or shards). Weights keep their file dtype (float32,
    bfloat16, float16; compute is float32) unless dtype is given.

    model(input_ids, attention_mask=None, position_ids=None) -> logits [B, T, vocab] float32.
    Parameters are named as in transformers (model.layers.0.self_attn.q_proj.weight, ...), so
    trainable_params(), value_and_grad, optimizers, save_checkpoint and Model work as for any
    Cell.
    """

    __slots__ = ()

    def __new__(cls, config, dtype=None):
        return cls._adopt(ext().llama_new(config, dtype), None)

    @classmethod
    def _adopt(cls, cell, name_or_path):
        model = _make(cls, cell)
        object.__setattr__(model, "name_or_path", name_or_path)
        object.__setattr__(model, "peft_config", None)
        return model

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, dtype=None, torch_dtype=None):
        """The model of an HF directory; dtype (or transformers' torch_dtype): a zenith dtype
        or its name ('float32', 'bfloat16', 'float16') to convert the weights to."""
        dtype = dtype if dtype is not None else torch_dtype
        path = str(pretrained_model_name_or_path)
        return cls._adopt(ext().llama_from_pretrained(path, dtype), path)

    def save_pretrained(self, save_directory, max_shard_size=None):
        """config.json and the weights (model.safetensors, or shards of at most max_shard_size
        bytes + the index), plus the tokenizer files of the directory the model came from.
        Adapters are not saved: merge_and_unload() first, or save_adapter()."""
        args = [self, str(save_directory)]
        if max_shard_size is not None:
            args.append(int(max_shard_size))
        ext().save_pretrained(*args)
        if self.name_or_path:
            ext().copy_model_side_files(self.name_or_path, str(save_directory))

    @property
    def config(self):
        """The model's zenith.llm.LlamaConfig (a copy)."""
        return ext().config(self)

    @property
    def dtype(self):
        """The storage dtype of the weights ('float32', 'bfloat16', 'float16')."""
        return ext().weight_dtype(self)

    def __call__(self, input_ids, attention_mask=None, position_ids=None):
        if attention_mask is None and position_ids is None:
            return self._forward(_as_tensor(input_ids))
        return self.forward(input_ids, attention_mask, position_ids)

    def construct(self, input_ids):
        return self._forward(input_ids)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        """Logits [B, T, vocab] of input_ids [B, T]; attention_mask [B, T] (1 token, 0 padding)
        and position_ids [B, T] as transformers takes them."""
        mask = None if attention_mask is None else _as_tensor(attention_mask)
        positions = None if position_ids is None else _as_tensor(position_ids)
        return ext().forward(self, _as_tensor(input_ids), mask, positions)

    # ---- generation
    def _default_eos(self):
        tokenizer = None
        if self.name_or_path:
            tokenizer = ext().Tokenizer.find_in_dir(self.name_or_path)
        return ext().generation_eos_ids(self, tokenizer)

    def generate(self, input_ids, max_new_tokens=None, temperature=None, top_k=None, top_p=None,
                 repetition_penalty=None, seed=None, do_sample=None, eos_token_id=None,
                 return_dict_in_generate=False):
        """Continues one prompt with a KV cache (`zenith generate`'s decoding).

        input_ids: a list of ids (returns a list) or a [1, T] / [T] Tensor (returns an int64
        Tensor [1, T + new]); the result is the prompt followed by the new tokens, as
        transformers returns it. Settings left None come from the model directory's
        generation_config.json (do_sample, temperature, top_k, top_p, repetition_penalty,
        max_new_tokens), else greedy and 128 new tokens, as transformers (and `zenith generate`)
        choose them. temperature=0 or do_sample=False: greedy; an explicit temperature > 0, top_k
        or top_p samples (seed: 0 by default). eos_token_id: an id or a list (default:
        config.json's and the tokenizer's). Generation stops at an eos, after max_new_tokens, or
        when the context is full. return_dict_in_generate: a dict {'sequences', 'new_tokens',
        'stop_reason'} ('eos', 'max_new_tokens' or 'context').
        """
        prompt = ids_list(input_ids)

        def given(value, kind):
            return None if value is None else kind(value)

        cfg = ext().resolve_generation_config(
            self.name_or_path or "", max_new_tokens=given(max_new_tokens, int),
            temperature=given(temperature, float), top_k=given(top_k, int),
            top_p=given(top_p, float), repetition_penalty=given(repetition_penalty, float),
            do_sample=given(do_sample, bool), seed=given(seed, int))
        if eos_token_id is None:
            cfg.eos_token_ids = self._default_eos()
        elif isinstance(eos_token_id, int):
            cfg.eos_token_ids = [eos_token_id]
        else:
            cfg.eos_token_ids = ids_list(eos_token_id, "eos_token_id")
        result = ext().generate(self, prompt, cfg)
        sequence = prompt + list(result["tokens"])
        if isinstance(input_ids, Tensor):
            sequence = _as_tensor([sequence], int64)
        if return_dict_in_generate:
            return {"sequences": sequence, "new_tokens": list(result["tokens"]),
                    "stop_reason": result["stop_reason"]}
        return sequence

    # ---- LoRA adapters (PEFT)
    def load_adapter(self, adapter_dir):
        """Applies a PEFT LoRA adapter directory unmerged (its shapes checked against the
        model)."""
        from zenith.llm.peft import LoraConfig
        ext().load_lora(self, str(adapter_dir))
        object.__setattr__(self, "peft_config", LoraConfig.from_pretrained(str(adapter_dir)))
        return self

    def save_adapter(self, save_directory):
        """Writes the adapters as PEFT does: adapter_config.json + adapter_model.safetensors."""
        if self.peft_config is None:
            raise ValueError("save_adapter: the model has no LoRA adapters (get_peft_model or "
                             "load_adapter first)")
        config = self.peft_config._cpp()
        if not config.base_model_name_or_path and self.name_or_path:
            config.base_model_name_or_path = self.name_or_path
        ext().save_lora(self, config, str(save_directory))

    def merge_and_unload(self):
        """W += B A scaling for every adapter (in each weight's dtype); the adapters are
        removed and the model is a plain Llama again. Returns the model."""
        ext().merge_lora(self)
        object.__setattr__(self, "peft_config", None)
        return self

    def linear_layer_names(self):
        """Module paths of every linear layer ('model.layers.0.self_attn.q_proj', ...)."""
        return list(ext().linear_layer_names(self))

    def gradient_checkpointing_enable(self):
        """Recompute each decoder layer in backward instead of keeping its activations."""
        ext().set_activation_checkpointing(self, True)


def perplexity(model, input_ids, max_seq_len=0):
    """{'nll', 'perplexity', 'tokens'} of the ids under the model (`zenith perplexity`): mean
    next-token NLL in windows of max_seq_len tokens (0: the context) overlapping by one."""
    if not isinstance(model, Llama):
        raise TypeError(f"perplexity: expected a zenith.llm.Llama, got {type(model).__name__}")
    return ext().perplexity(model, ids_list(input_ids), int(max_seq_len))


def causal_lm_loss(logits, labels):
    """transformers' causal-LM loss: mean cross entropy of logits [B, T, V] at t against labels
    [B, T] at t + 1; labels of -100 are ignored."""
    return ext().causal_lm_loss(_as_tensor(logits), _as_tensor(labels))
