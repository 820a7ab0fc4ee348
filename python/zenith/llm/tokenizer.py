"""zenith.llm.Tokenizer: a model directory's tokenizer (tokenizer.json or tokenizer.model, with
tokenizer_config.json's special tokens and chat template), as transformers reads it."""

from zenith.llm._ext import ext, ids_list

__all__ = ["Tokenizer"]


class Tokenizer:
    """Tokenizer.from_pretrained(dir): HF BPE (tokenizer.json, preferred) or SentencePiece
    (tokenizer.model).

        ids = tok.encode("Hello world")                  # bos added as the tokenizer says
        tok.decode(ids, skip_special_tokens=True)         # "Hello world"
        tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    """

    def __init__(self, cpp_tokenizer):
        self._tok = cpp_tokenizer

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path):
        return cls(ext().Tokenizer.from_dir(str(pretrained_model_name_or_path)))

    def encode(self, text, add_special_tokens=True):
        """Text -> list of ids."""
        if not isinstance(text, str):
            raise TypeError(f"encode: expected a str, got {type(text).__name__}")
        return list(self._tok.encode(text, add_special_tokens))

    def __call__(self, text, add_special_tokens=True):
        """transformers' call: {'input_ids': ids, 'attention_mask': ones}."""
        ids = self.encode(text, add_special_tokens)
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}

    def decode(self, token_ids, skip_special_tokens=False):
        """Ids (list or Tensor) -> text; bytes that are not UTF-8 become U+FFFD."""
        return self._tok.decode(ids_list(token_ids, "token_ids"), skip_special_tokens)

    def apply_chat_template(self, conversation, add_generation_prompt=False, tokenize=True,
                            chat_template=None):
        """A conversation (a list of {'role', 'content'} dicts) in the model's chat format
        (tokenizer_config.json's template, recognised as llama-2, llama-3, chatml or alpaca; or
        chat_template: one of those names): ids (tokenize=True) or the text."""
        messages = []
        for i, m in enumerate(conversation):
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise ValueError(f"apply_chat_template: message {i} must be a dict with 'role' "
                                 f"and 'content', got {m!r}")
            messages.append((str(m["role"]), str(m["content"])))
        out = self._tok.apply_chat_template(messages, bool(add_generation_prompt),
                                            chat_template or "", bool(tokenize))
        return list(out["ids"]) if tokenize else out["text"]

    def convert_ids_to_tokens(self, ids):
        """The vocabulary's strings of ids ('▁world', 'Ġworld', '<s>')."""
        if isinstance(ids, int):
            return self._tok.id_to_piece(ids)
        return [self._tok.id_to_piece(i) for i in ids_list(ids, "ids")]

    def convert_tokens_to_ids(self, tokens):
        """The ids of vocabulary strings (None for one not in the vocabulary)."""
        if isinstance(tokens, str):
            return self._tok.piece_to_id(tokens)
        return [self._tok.piece_to_id(t) for t in tokens]

    vocab_size = property(lambda self: self._tok.vocab_size, doc="Ids are 0 .. vocab_size - 1.")
    bos_token_id = property(lambda self: self._tok.bos_token_id)
    eos_token_id = property(lambda self: self._tok.eos_token_id)
    pad_token_id = property(lambda self: self._tok.pad_token_id)
    unk_token_id = property(lambda self: self._tok.unk_token_id)
    bos_token = property(lambda self: self._tok.bos_token)
    eos_token = property(lambda self: self._tok.eos_token)
    eos_token_ids = property(lambda self: list(self._tok.eos_token_ids),
                             doc="eos and generation_config.json's eos_token_id list.")
    chat_template = property(lambda self: self._tok.chat_template)

    def __len__(self):
        return self.vocab_size

    def __repr__(self):
        return f"Tokenizer({self._tok.kind}, vocab_size={self.vocab_size})"
