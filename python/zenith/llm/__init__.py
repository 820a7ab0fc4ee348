"""zenith.llm: the LLaMA family and fine-tuning from Python (MindFormers' role).

Not bound yet: the C++ side (src/models/llama, fine-tuning) is being built in other issues.
This package is where their Python names will go: llm.AutoModel.from_pretrained(dir),
llm.Tokenizer, llm.LoraConfig, llm.Trainer and generate(), reading the same Hugging Face and
PEFT directories as `zenith finetune` / `zenith generate`. Until then, every name here raises.
"""

__all__ = []


class NotBuiltYet(AttributeError, NotImplementedError):
    """A zenith.llm name that has no binding yet."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotBuiltYet(f"zenith.llm.{name}: the LLaMA-family Python bindings are not "
                              "built yet (the C++ models land first; see the README's Python "
                              "section)")
