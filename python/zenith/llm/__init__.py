"""zenith.llm: the LLaMA family and fine-tuning from Python (MindFormers' role), with the
names of Hugging Face transformers and PEFT.

    from zenith import llm
    tokenizer = llm.Tokenizer.from_pretrained("examples/llm/fortunes-llama")
    model = llm.Llama.from_pretrained("examples/llm/fortunes-llama")      # a zenith.nn.Cell
    ids = tokenizer.encode("Once upon a time")
    out = model.generate(ids)        # generation_config.json's settings; do_sample=False: greedy
    print(tokenizer.decode(out[len(ids):], skip_special_tokens=True))
    print(llm.perplexity(model, ids))             # {"nll", "perplexity", "tokens"}

    model = llm.get_peft_model(model, llm.LoraConfig(r=8, lora_alpha=16,
                                                     target_modules=["q_proj", "v_proj"]))
    model.trainable_params()                  # the adapters only; train with value_and_grad
    model.save_adapter("my-adapter")          # adapter_config.json + adapter_model.safetensors
    llm.finetune(model="examples/llm/fortunes-llama", data="train.jsonl", out="run", max_steps=20)

Everything computes in zenith's C++ core (src/models/llama*, src/nn/lora*, src/text,
src/train/finetune.cpp): the same model directories, adapters, generation and perplexity as
`zenith generate`, `zenith perplexity` and `zenith finetune`. The compiled part
(zenith._zenith_llm) loads on first use.
"""

from zenith.llm.model import Llama, causal_lm_loss, perplexity
from zenith.llm.peft import LoraConfig, get_peft_model
from zenith.llm.tokenizer import Tokenizer
from zenith.llm.training import finetune

__all__ = ["LlamaConfig", "Llama", "Tokenizer", "LoraConfig", "get_peft_model", "perplexity",
           "causal_lm_loss", "finetune", "AutoModelForCausalLM", "AutoTokenizer"]

# transformers' Auto names for the one family zenith has.
AutoModelForCausalLM = Llama
AutoTokenizer = Tokenizer


def __getattr__(name):
    # LlamaConfig is the C++ class itself: loading it loads the compiled module.
    if name == "LlamaConfig":
        from zenith.llm._ext import ext
        return ext().LlamaConfig
    raise AttributeError(f"module 'zenith.llm' has no attribute {name!r}")
