"""LoRA adapters with PEFT's names: LoraConfig and get_peft_model (the adapter files are PEFT's
adapter_config.json + adapter_model.safetensors)."""

from zenith.llm._ext import ext

__all__ = ["LoraConfig", "get_peft_model"]


class LoraConfig:
    """PEFT's LoraConfig for a zenith.llm.Llama.

    r: rank; lora_alpha: scaling alpha / r (alpha / sqrt(r) with use_rslora); target_modules:
    module names matched as PEFT matches them (a list of suffixes such as ["q_proj",
    "v_proj"], "all-linear", or another string: a regex matched against the whole module
    path); default q_proj and v_proj, PEFT's choice for LLaMA. lora_dropout: dropout on the
    adapter's input while training; layers_to_transform: layer indices (default every layer).
    Only bias="none" is supported.
    """

    def __init__(self, r=8, lora_alpha=8, target_modules=None, lora_dropout=0.0,
                 use_rslora=False, layers_to_transform=None, bias="none",
                 task_type="CAUSAL_LM", base_model_name_or_path=None, inference_mode=False):
        self.r = r
        self.lora_alpha = lora_alpha
        self.target_modules = ["q_proj", "v_proj"] if target_modules is None else target_modules
        self.lora_dropout = lora_dropout
        self.use_rslora = use_rslora
        self.layers_to_transform = layers_to_transform
        self.bias = bias
        self.task_type = task_type
        self.base_model_name_or_path = base_model_name_or_path
        self.inference_mode = inference_mode

    @classmethod
    def from_pretrained(cls, path):
        """The config of an adapter directory (or its adapter_config.json)."""
        c = ext().LoraConfig.from_pretrained(str(path))
        if c.all_linear:
            targets = "all-linear"
        elif c.target_regex:
            targets = c.target_regex
        else:
            targets = list(c.target_modules)
        return cls(r=c.r, lora_alpha=c.lora_alpha, target_modules=targets,
                   lora_dropout=c.lora_dropout, use_rslora=c.use_rslora,
                   layers_to_transform=list(c.layers_to_transform) or None, bias=c.bias,
                   task_type=c.task_type, base_model_name_or_path=c.base_model_name_or_path or None,
                   inference_mode=c.inference_mode)

    def _cpp(self):
        """The C++ io::LoraConfig (type errors name the field)."""
        c = ext().LoraConfig()
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r <= 0:
            raise ValueError(f"LoraConfig: r must be a positive int, got {self.r!r}")
        if not isinstance(self.lora_alpha, (int, float)) or self.lora_alpha <= 0:
            raise ValueError(f"LoraConfig: lora_alpha must be a positive number, got "
                             f"{self.lora_alpha!r}")
        if not 0 <= float(self.lora_dropout) < 1:
            raise ValueError(f"LoraConfig: lora_dropout must be in [0, 1), got "
                             f"{self.lora_dropout!r}")
        if self.bias != "none":
            raise ValueError(f"LoraConfig: bias={self.bias!r} is not supported (only 'none')")
        c.r = self.r
        c.lora_alpha = float(self.lora_alpha)
        targets = self.target_modules
        if targets == "all-linear":
            c.all_linear = True
        elif isinstance(targets, str):
            c.target_regex = targets
        else:
            targets = list(targets)
            if not targets or not all(isinstance(t, str) for t in targets):
                raise ValueError(f"LoraConfig: target_modules must be module names, got "
                                 f"{self.target_modules!r}")
            c.target_modules = targets
        c.lora_dropout = float(self.lora_dropout)
        c.use_rslora = bool(self.use_rslora)
        c.layers_to_transform = list(self.layers_to_transform or [])
        c.task_type = self.task_type
        c.base_model_name_or_path = self.base_model_name_or_path or ""
        c.inference_mode = bool(self.inference_mode)
        return c

    def to_json_string(self):
        """adapter_config.json's text, as PEFT writes it."""
        return self._cpp().to_json_string()

    def __repr__(self):
        return (f"LoraConfig(r={self.r}, lora_alpha={self.lora_alpha}, "
                f"target_modules={self.target_modules!r}, lora_dropout={self.lora_dropout}, "
                f"use_rslora={self.use_rslora})")


def get_peft_model(model, peft_config):
    """Adds fresh LoRA adapters (A kaiming-uniform, B zero: the model computes what it did) on
    every module peft_config targets and freezes the base weights, so trainable_params() are
    the adapters. Returns the model itself (PEFT wraps it; zenith's Llama carries the adapters:
    save_adapter, merge_and_unload)."""
    from zenith.llm.model import Llama
    if not isinstance(model, Llama):
        raise TypeError(f"get_peft_model: expected a zenith.llm.Llama, got "
                        f"{type(model).__name__}")
    if not isinstance(peft_config, LoraConfig):
        raise TypeError(f"get_peft_model: expected a zenith.llm.LoraConfig, got "
                        f"{type(peft_config).__name__}")
    ext().add_lora(model, peft_config._cpp())
    ext().freeze_base(model, True)
    object.__setattr__(model, "peft_config", peft_config)
    return model
