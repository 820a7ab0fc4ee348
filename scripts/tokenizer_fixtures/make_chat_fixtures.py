#!/usr/bin/python3
"""Writes tests/fixtures/text/expected_chat.json: the well-known Jinja chat templates (as model
repositories ship them, in make_tokenizers.py) rendered by Jinja2 the way transformers'
apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks), for a few conversations with
and without the generation prompt. zenith renders its built-in equivalents and must agree.
Needs Debian's python3-jinja2. Run by regenerate.sh.
"""
import json
import os

from jinja2.sandbox import ImmutableSandboxedEnvironment

import make_tokenizers as t

TEMPLATES = {
    "llama-3": (t.LLAMA3_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>"),
    "llama-2": (t.LLAMA2_TEMPLATE, "<s>", "</s>"),
    "chatml": (t.CHATML_TEMPLATE, "", "<|im_end|>"),
    "alpaca": (t.ALPACA_TEMPLATE, "<s>", "</s>"),
}
CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "  Hi  \n"},
     {"role": "assistant", "content": " Hello there. "},
     {"role": "user", "content": "Tell me a joke."}],
    [{"role": "system", "content": "Be kind."},
     {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello! How can I help?"}],
]


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    out = {"generator": "Jinja2 (scripts/tokenizer_fixtures/make_chat_fixtures.py)",
           "templates": {}, "cases": []}
    for name, (source, bos, eos) in TEMPLATES.items():
        out["templates"][name] = {"jinja": source, "bos_token": bos, "eos_token": eos}
        template = env.from_string(source)
        for messages in CONVERSATIONS:
            for generation in (False, True):
                text = template.render(messages=messages, bos_token=bos, eos_token=eos,
                                       add_generation_prompt=generation)
                out["cases"].append({"template": name, "messages": messages,
                                     "add_generation_prompt": generation, "text": text})
    path = os.path.join(t.OUT, "expected_chat.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
