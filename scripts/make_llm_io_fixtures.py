#!/usr/bin/python3
"""Writes the fixtures of zenith's LLM file tests (tests/io/llama2c_test.cpp, hf_state_test.cpp).

    /usr/bin/python3 scripts/make_llm_io_fixtures.py [--out tests/fixtures/llm_io]

Needs Debian's python3-torch and python3-numpy; the test suite itself never runs Python.

llama2c_v0.bin     a small random llama2.c checkpoint in the legacy format (version 0), as
                   llama2.c's export.py legacy_export writes it: dim 24, hidden_dim 40, 2 layers,
                   4 heads, 2 kv heads (grouped-query), vocab 48, seq_len 12, own classifier
                   (negative vocab_size in the header), the RoPE tables freq_cis_real/imag.
llama2c_v1.bin     the same weights in version 1 (version1_export: "ak42" magic, 256-byte header),
                   with the classifier shared with the embeddings.
llama2c_hf.safetensors
                   what converting llama2c_v0.bin to Hugging Face's layout must give, computed
                   here independently with torch: HF names, w1/w2/w3 -> gate/down/up, and q/k rows
                   reordered by the permutation transformers' convert_llama_weights_to_hf.py
                   applies, w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2)
                   .reshape(dim1, dim2) (n_kv_heads for k). Also "bf16.<q_proj of layer 0>" and
                   "f16.<...>": torch's round-to-nearest-even casts, which --dtype must equal.
hf_qwen2_sharded/  a tiny Qwen2 (q/k/v biases, tied embeddings) in bfloat16 as save_pretrained
                   writes it with max_shard_size=1500: config.json, two shards
                   model-0000N-of-00002.safetensors (metadata {"format": "pt"}) and
                   model.safetensors.index.json; hf_qwen2_reference.safetensors holds the same
                   tensors widened to float32 (exact).

Why the permutation is right (asserted below, in float64): Meta's rotary embedding rotates the
pairs (2i, 2i+1) of each head's channels by angle pos * theta^(-2i/d) (llama2.c's
apply_rotary_emb, complex multiplication); transformers' rotate_half rotates the pairs
(i, i + d/2) by the same angles. With q_proj's rows permuted, channel i of the HF head is Meta's
channel 2i and channel i + d/2 is Meta's 2i + 1, so HF's rotated q is Meta's rotated q with its
channels permuted the same way. The same holds for k, so every attention score q.k (a dot product,
invariant when both vectors are permuted alike) is unchanged: the converted model computes what
the original computed.
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch

ST_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


def save_safetensors(path, tensors, metadata=None, compact=True):
    """safetensors: 8-byte little-endian header size, JSON header padded to 8 bytes, raw data."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":") if compact else None).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(tensors)} tensors)")


def serialize_fp32(f, t):
    f.write(t.detach().contiguous().view(-1).to(torch.float32).numpy().tobytes())


# ---- llama2.c


class Llama2c:
    """The weights of a llama2.c Transformer (model.py), PyTorch [out, in] layout."""

    def __init__(self, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, seed):
        g = torch.Generator().manual_seed(seed)
        r = lambda *shape: torch.randn(*shape, generator=g) * 0.5
        self.dim, self.hidden_dim, self.n_layers = dim, hidden_dim, n_layers
        self.n_heads, self.n_kv_heads, self.vocab_size, self.seq_len = n_heads, n_kv_heads, vocab_size, seq_len
        head = dim // n_heads
        kv_dim = head * n_kv_heads
        self.tok_embeddings = r(vocab_size, dim)
        self.attention_norm = [1 + 0.1 * r(dim) for _ in range(n_layers)]
        self.wq = [r(dim, dim) for _ in range(n_layers)]
        self.wk = [r(kv_dim, dim) for _ in range(n_layers)]
        self.wv = [r(kv_dim, dim) for _ in range(n_layers)]
        self.wo = [r(dim, dim) for _ in range(n_layers)]
        self.ffn_norm = [1 + 0.1 * r(dim) for _ in range(n_layers)]
        self.w1 = [r(hidden_dim, dim) for _ in range(n_layers)]
        self.w2 = [r(dim, hidden_dim) for _ in range(n_layers)]
        self.w3 = [r(hidden_dim, dim) for _ in range(n_layers)]
        self.norm = 1 + 0.1 * r(dim)
        self.output = r(vocab_size, dim)
        # llama2.c's precompute_freqs_cis(head, seq_len): the tables version 0 files carry.
        freqs = 1.0 / (10000.0 ** (torch.arange(0, head, 2)[: head // 2].float() / head))
        freqs = torch.outer(torch.arange(seq_len), freqs).float()
        self.freqs_cos, self.freqs_sin = torch.cos(freqs), torch.sin(freqs)

    def export_v0(self, path):
        """export.py legacy_export: the own classifier is flagged by a negative vocab_size."""
        with open(path, "wb") as f:
            f.write(struct.pack("iiiiiii", self.dim, self.hidden_dim, self.n_layers, self.n_heads,
                                self.n_kv_heads, -self.vocab_size, self.seq_len))
            serialize_fp32(f, self.tok_embeddings)
            for group in (self.attention_norm, self.wq, self.wk, self.wv, self.wo, self.ffn_norm,
                          self.w1, self.w2, self.w3):
                for t in group:
                    serialize_fp32(f, t)
            serialize_fp32(f, self.norm)
            serialize_fp32(f, self.freqs_cos[: self.seq_len])
            serialize_fp32(f, self.freqs_sin[: self.seq_len])
            serialize_fp32(f, self.output)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")

    def export_v1(self, path, shared_classifier):
        """export.py version1_export."""
        with open(path, "wb") as f:
            f.write(struct.pack("I", 0x616B3432))
            f.write(struct.pack("i", 1))
            f.write(struct.pack("iiiiiii", self.dim, self.hidden_dim, self.n_layers, self.n_heads,
                                self.n_kv_heads, self.vocab_size, self.seq_len))
            f.write(struct.pack("B", int(shared_classifier)))
            f.write(b"\0" * (256 - f.tell()))
            weights = [*self.attention_norm, *self.ffn_norm, self.norm, self.tok_embeddings,
                       *self.wq, *self.wk, *self.wv, *self.wo, *self.w1, *self.w2, *self.w3]
            if not shared_classifier:
                weights.append(self.output)
            for w in weights:
                serialize_fp32(f, w)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def permute(w, n_heads, dim1, dim2):
    """transformers' convert_llama_weights_to_hf.py: Meta's rotary row order -> HF's."""
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def hf_state(m):
    head = m.dim // m.n_heads
    out = {"model.embed_tokens.weight": m.tok_embeddings, "model.norm.weight": m.norm,
           "lm_head.weight": m.output}
    for i in range(m.n_layers):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = m.attention_norm[i]
        out[p + "self_attn.q_proj.weight"] = permute(m.wq[i], m.n_heads, m.dim, m.dim)
        out[p + "self_attn.k_proj.weight"] = permute(m.wk[i], m.n_kv_heads, head * m.n_kv_heads, m.dim)
        out[p + "self_attn.v_proj.weight"] = m.wv[i]
        out[p + "self_attn.o_proj.weight"] = m.wo[i]
        out[p + "post_attention_layernorm.weight"] = m.ffn_norm[i]
        out[p + "mlp.gate_proj.weight"] = m.w1[i]
        out[p + "mlp.down_proj.weight"] = m.w2[i]
        out[p + "mlp.up_proj.weight"] = m.w3[i]
    return {k: v.clone().contiguous() for k, v in out.items()}


def rotary_meta(x, theta=10000.0):
    """llama2.c / Meta apply_rotary_emb: x [T, H, d], pairs (2i, 2i+1)."""
    T, _, d = x.shape
    freqs = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.outer(torch.arange(T, dtype=torch.float64), freqs)[:, None, :]
    xr, xi = x.reshape(T, -1, d // 2, 2).unbind(-1)
    return torch.stack([xr * angles.cos() - xi * angles.sin(),
                        xr * angles.sin() + xi * angles.cos()], dim=-1).flatten(2)


def rotary_hf(x, theta=10000.0):
    """transformers' apply_rotary_pos_emb with rotate_half: x [T, H, d], pairs (i, i + d/2)."""
    T, _, d = x.shape
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()


def assert_permutation_meaning(m, hf):
    """Rotary(Meta) on the original q/k == rotary(HF) on the permuted q/k, up to the same channel
    permutation; hence equal attention scores (see the module docstring)."""
    head = m.dim // m.n_heads
    g = torch.Generator().manual_seed(7)
    x = torch.randn(m.seq_len, m.dim, generator=g, dtype=torch.float64)
    order = torch.cat([torch.arange(0, head, 2), torch.arange(1, head, 2)])  # HF channel -> Meta's
    for i in range(m.n_layers):
        p = f"model.layers.{i}.self_attn."
        q_meta = rotary_meta((x @ m.wq[i].double().T).view(m.seq_len, m.n_heads, head))
        k_meta = rotary_meta((x @ m.wk[i].double().T).view(m.seq_len, m.n_kv_heads, head))
        q_hf = rotary_hf((x @ hf[p + "q_proj.weight"].double().T).view(m.seq_len, m.n_heads, head))
        k_hf = rotary_hf((x @ hf[p + "k_proj.weight"].double().T).view(m.seq_len, m.n_kv_heads, head))
        assert torch.allclose(q_hf, q_meta[..., order], atol=1e-12, rtol=0)
        assert torch.allclose(k_hf, k_meta[..., order], atol=1e-12, rtol=0)
        rep = m.n_heads // m.n_kv_heads  # grouped-query: query head h reads kv head h // rep
        scores_meta = torch.einsum("thd,shd->hts", q_meta, k_meta.repeat_interleave(rep, dim=1))
        scores_hf = torch.einsum("thd,shd->hts", q_hf, k_hf.repeat_interleave(rep, dim=1))
        assert torch.allclose(scores_hf, scores_meta, atol=1e-10, rtol=0)
    # And the permutation is not the identity: without it the scores differ.
    q_plain = rotary_hf((x @ m.wq[0].double().T).view(m.seq_len, m.n_heads, head))
    assert not torch.allclose(q_plain, q_meta[..., order], atol=1e-3)
    print("checked: rotary(Meta, original q/k) == rotary(HF, permuted q/k), same attention scores")


# ---- a save_pretrained-shaped sharded directory


def write_qwen2_sharded(out):
    cfg = {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
           "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 8, "initializer_range": 0.02,
           "intermediate_size": 12, "max_position_embeddings": 64, "max_window_layers": 2,
           "model_type": "qwen2", "num_attention_heads": 2, "num_hidden_layers": 2,
           "num_key_value_heads": 1, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
           "sliding_window": 64, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
           "transformers_version": "4.40.1", "use_cache": True, "use_sliding_window": False,
           "vocab_size": 16}
    g = torch.Generator().manual_seed(3)
    h, inter, head = 8, 12, 4
    state = {"model.embed_tokens.weight": torch.randn(16, h, generator=g)}
    for i in range(2):
        p = f"model.layers.{i}."
        for name, shape in [("self_attn.q_proj.weight", (8, h)), ("self_attn.q_proj.bias", (8,)),
                            ("self_attn.k_proj.weight", (head, h)), ("self_attn.k_proj.bias", (head,)),
                            ("self_attn.v_proj.weight", (head, h)), ("self_attn.v_proj.bias", (head,)),
                            ("self_attn.o_proj.weight", (h, 8)), ("mlp.gate_proj.weight", (inter, h)),
                            ("mlp.up_proj.weight", (inter, h)), ("mlp.down_proj.weight", (h, inter)),
                            ("input_layernorm.weight", (h,)), ("post_attention_layernorm.weight", (h,))]:
            state[p + name] = torch.randn(*shape, generator=g)
    state["model.norm.weight"] = torch.randn(h, generator=g)
    state = {k: v.to(torch.bfloat16) for k, v in state.items()}

    # huggingface_hub's split_torch_state_dict_into_shards, in the model's order: a new shard when
    # the next tensor would overflow the current one.
    max_bytes, shards, size = 1500, [{}], 0
    for name, t in state.items():
        n = t.numel() * t.element_size()
        if shards[-1] and size + n > max_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += n
    assert len(shards) == 2, len(shards)  # the tests expect two
    d = os.path.join(out, "hf_qwen2_sharded")
    os.makedirs(d, exist_ok=True)
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_safetensors(os.path.join(d, name), shard, {"format": "pt"})
        weight_map.update({k: name for k in shard})
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    save_safetensors(os.path.join(out, "hf_qwen2_reference.safetensors"),
                     {k: v.float() for k, v in state.items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "llm_io"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)

    m = Llama2c(dim=24, hidden_dim=40, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=48,
                seq_len=12, seed=0)
    m.export_v0(os.path.join(out, "llama2c_v0.bin"))
    m.export_v1(os.path.join(out, "llama2c_v1.bin"), shared_classifier=True)
    hf = hf_state(m)
    assert_permutation_meaning(m, hf)
    q0 = hf["model.layers.0.self_attn.q_proj.weight"]
    expected = dict(hf)
    expected["bf16.model.layers.0.self_attn.q_proj.weight"] = q0.to(torch.bfloat16)
    expected["f16.model.layers.0.self_attn.q_proj.weight"] = q0.to(torch.float16)
    save_safetensors(os.path.join(out, "llama2c_hf.safetensors"), expected)
    write_qwen2_sharded(out)


if __name__ == "__main__":
    main()
