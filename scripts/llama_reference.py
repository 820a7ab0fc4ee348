#!/usr/bin/python3
"""A PyTorch reference of Hugging Face's LlamaForCausalLM (also Mistral and Qwen2) and of PEFT's
LoRA, for scripts/make_fixtures.py (the fixtures) and bench/llm_torch.py (the speed baseline).

Written from transformers' `modeling_llama.py` / `modeling_rope_utils.py` / `modeling_qwen2.py`
conventions and PEFT's `tuners/lora/layer.py` (transformers is not packaged in Debian). Module and
parameter names are HF's (`model.layers.N.self_attn.q_proj.weight`, ..., `lm_head.weight`), so a
state dict is a checkpoint. The arithmetic follows HF's eager path:

  RMSNorm     y = w * (x / sqrt(mean(x^2) + eps)), normalised in float32 when x is bf16/f16
              (in x's own dtype when that is float32/float64), cast back to x's dtype before * w.
  RoPE        HF's "half" layout: q*cos + rotate_half(q)*sin, rotate_half(x) = [-x2, x1] over the
              two halves of head_dim; angles = position * inv_freq, emb = cat(angles, angles);
              inv_freq = theta^(-2i/head_dim), then rope_scaling `linear` (/ factor) or `llama3`.
  Attention   GQA by repeat_kv (query head h reads kv head h // (heads / kv_heads)); scores
              q.k * head_dim^-0.5 + additive mask (0 or finfo.min); softmax in float32 for
              bf16/f16; causal, optionally with a [B, T_keys] padding mask (0 = padding).
  MLP         down(silu(gate(x)) * up(x)).
  Biases      `attention_bias` puts a bias on q/k/v/o; Qwen2 always has q/k/v biases and no o bias.
  Head        lm_head, or the embedding matrix when tie_word_embeddings.
  Loss        mean cross entropy of logits[:, :-1] against labels[:, 1:], labels == -100 ignored.
  LoRA        y = W x + b + B(A x) * scaling, scaling = alpha / r (alpha / sqrt(r) with rslora);
              merging sets W += B @ A * scaling.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")
LOW_PRECISION = (torch.float16, torch.bfloat16)


class Config:
    """The fields of an HF config.json that the model reads, with HF's defaults."""

    def __init__(self, d):
        arch = d["architectures"][0]
        if arch not in ARCHITECTURES:
            raise ValueError(f"[llama_reference] architecture {arch} not in {ARCHITECTURES}")
        self.architecture = arch
        self.vocab_size = d["vocab_size"]
        self.hidden_size = d["hidden_size"]
        self.intermediate_size = d["intermediate_size"]
        self.num_hidden_layers = d["num_hidden_layers"]
        self.num_attention_heads = d["num_attention_heads"]
        self.num_key_value_heads = d.get("num_key_value_heads") or self.num_attention_heads
        self.head_dim = d.get("head_dim") or self.hidden_size // self.num_attention_heads
        self.rms_norm_eps = d.get("rms_norm_eps", 1e-6)
        self.rope_theta = float(d.get("rope_theta", 10000.0))
        self.rope_scaling = d.get("rope_scaling")
        # LlamaConfig, MistralConfig and Qwen2Config all default to untied (PretrainedConfig: tied).
        self.tie_word_embeddings = d.get("tie_word_embeddings", False)
        qwen2 = arch == "Qwen2ForCausalLM"
        self.qkv_bias = qwen2 or d.get("attention_bias", False)
        self.o_bias = not qwen2 and d.get("attention_bias", False)
        self.mlp_bias = d.get("mlp_bias", False)


def rope_inv_freq(cfg):
    """inv_freq [head_dim / 2] in float64, after rope_scaling (none, `linear`, `llama3`)."""
    d = cfg.head_dim
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    rs = cfg.rope_scaling
    kind = None if rs is None else rs.get("rope_type", rs.get("type"))
    if kind in (None, "default"):
        return inv
    if kind == "linear":
        return inv / rs["factor"]
    if kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old_len = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        # Long wavelengths (> old_len / low) are divided by factor, short ones (< old_len / high)
        # kept, and the band between interpolates linearly in old_len / wavelen.
        scaled = torch.where(wavelen > old_len / low, inv / factor, inv)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
        return torch.where(medium, smoothed, scaled)
    raise ValueError(f"[llama_reference] rope_scaling type {kind} not supported")


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(x, n_rep):
    """[B, KV, T, D] -> [B, KV * n_rep, T, D]; kv head j serves query heads j*n_rep .. +n_rep-1."""
    b, kv, t, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None].expand(b, kv, n_rep, t, d).reshape(b, kv * n_rep, t, d)


def attention_mask_bias(attention_mask, batch, q_len, past_len, dtype):
    """Additive mask [B, 1, Tq, Tk]: finfo.min where key k is after query q or is padding."""
    k_len = past_len + q_len
    q_pos = torch.arange(past_len, k_len)[:, None]
    blocked = (torch.arange(k_len)[None, :] > q_pos)[None, None].expand(batch, 1, q_len, k_len)
    if attention_mask is not None:
        blocked = blocked | (attention_mask[:, None, None, :k_len] == 0)
    return torch.zeros(blocked.shape, dtype=dtype).masked_fill(blocked, torch.finfo(dtype).min)


def generate_position_ids(attention_mask):
    """HF generate's position ids for a padded batch: cumsum(mask) - 1, padding at 1."""
    return (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)


class Linear(nn.Linear):
    """nn.Linear with an optional unmerged LoRA adapter (PEFT's lora.Linear, dropout 0)."""

    def add_lora(self, r, alpha, use_rslora):
        self.lora_A = nn.Linear(self.in_features, r, bias=False, dtype=self.weight.dtype)
        self.lora_B = nn.Linear(r, self.out_features, bias=False, dtype=self.weight.dtype)
        self.scaling = alpha / (math.sqrt(r) if use_rslora else r)

    def has_lora(self):
        return "lora_A" in self._modules

    def delta_weight(self):
        return self.lora_B.weight @ self.lora_A.weight * self.scaling

    @torch.no_grad()
    def merge(self):
        self.weight += self.delta_weight()
        del self.lora_A, self.lora_B

    def forward(self, x):
        y = super().forward(x)
        if self.has_lora():
            y = y + self.lora_B(self.lora_A(x)) * self.scaling
        return y


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        h = x.float() if x.dtype in LOW_PRECISION else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class KVCache:
    """Per layer the keys and values seen so far, [B, KV, T_past, D] (before repeat_kv)."""

    def __init__(self, num_layers):
        self.layers = [None] * num_layers

    def length(self):
        return 0 if self.layers[0] is None else self.layers[0][0].shape[2]

    def update(self, i, k, v):
        if self.layers[i] is not None:
            k = torch.cat([self.layers[i][0], k], dim=2)
            v = torch.cat([self.layers[i][1], v], dim=2)
        self.layers[i] = (k, v)
        return k, v


class Attention(nn.Module):
    def __init__(self, cfg, layer_idx):
        super().__init__()
        h, kv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.heads, self.kv_heads, self.head_dim, self.layer_idx = h, kv, d, layer_idx
        self.q_proj = Linear(cfg.hidden_size, h * d, bias=cfg.qkv_bias)
        self.k_proj = Linear(cfg.hidden_size, kv * d, bias=cfg.qkv_bias)
        self.v_proj = Linear(cfg.hidden_size, kv * d, bias=cfg.qkv_bias)
        self.o_proj = Linear(h * d, cfg.hidden_size, bias=cfg.o_bias)

    def forward(self, x, cos, sin, mask, cache):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos[:, None], sin[:, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)
        k = repeat_kv(k, self.heads // self.kv_heads)
        v = repeat_kv(v, self.heads // self.kv_heads)
        scores = q @ k.transpose(2, 3) * self.head_dim ** -0.5 + mask
        softmax_dtype = torch.float32 if q.dtype in LOW_PRECISION else q.dtype
        p = F.softmax(scores, dim=-1, dtype=softmax_dtype).to(q.dtype)
        return self.o_proj((p @ v).transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = Linear(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.up_proj = Linear(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.down_proj = Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.self_attn = Attention(cfg, layer_idx)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, mask, cache):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    """HF's LlamaModel: embeddings, decoder layers, final norm."""

    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.model = Decoder(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    def head_weight(self):
        return self.model.embed_tokens.weight if self.config.tie_word_embeddings else \
            self.lm_head.weight

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None):
        """Logits [B, T, V]. attention_mask [B, T_past + T] (1 = token, 0 = padding);
        position_ids [B, T] default to T_past + arange(T), as HF's forward."""
        b, t = input_ids.shape
        past = cache.length() if cache is not None else 0
        x = self.model.embed_tokens(input_ids)
        if position_ids is None:
            position_ids = torch.arange(past, past + t)[None].expand(b, t)
        angles = position_ids.to(torch.float64)[..., None] * self.inv_freq
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        mask = attention_mask_bias(attention_mask, b, t, past, x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask, cache)
        x = self.model.norm(x)
        return F.linear(x, self.head_weight()) if self.config.tie_word_embeddings else \
            self.lm_head(x)


def causal_lm_loss(logits, labels):
    """HF's ForCausalLMLoss: predictions at t score labels at t + 1; -100 is ignored."""
    v = logits.shape[-1]
    logits = logits.float() if logits.dtype in LOW_PRECISION else logits
    return F.cross_entropy(logits[:, :-1].reshape(-1, v), labels[:, 1:].reshape(-1),
                           ignore_index=-100)


@torch.no_grad()
def greedy(model, prompt, new_tokens):
    """Greedy decoding with a KV cache, no eos stop: (tokens [1, N], top-1 minus top-2 logit
    at each step)."""
    cache = KVCache(len(model.model.layers))
    logits = model(prompt, cache=cache)
    tokens, margins = [], []
    for _ in range(new_tokens):
        top = logits[0, -1].topk(2)
        margins.append((top.values[0] - top.values[1]).item())
        tokens.append(top.indices[0].item())
        logits = model(torch.tensor([[tokens[-1]]]), cache=cache)
    return torch.tensor([tokens]), margins


def linear_module_names(model):
    """Every Linear but the output head: what PEFT's `all-linear` expands to."""
    return [n for n, m in model.named_modules() if isinstance(m, Linear) and n != "lm_head"]


def add_lora(model, target_modules, r, alpha, use_rslora=False):
    """Adds adapters to the Linear modules whose name is a target or ends in "." + a target
    (PEFT's matching); returns their module names."""
    names = [n for n in linear_module_names(model)
             if any(n == t or n.endswith("." + t) for t in target_modules)]
    if not names:
        raise ValueError(f"[llama_reference] no module matches {target_modules}")
    modules = dict(model.named_modules())
    for n in names:
        modules[n].add_lora(r, alpha, use_rslora)
    return names


def lora_modules(model):
    return [(n, m) for n, m in model.named_modules() if isinstance(m, Linear) and m.has_lora()]


def peft_state_dict(model):
    """The adapter tensors under the names PEFT saves (adapter name dropped)."""
    out = {}
    for n, m in lora_modules(model):
        out[f"base_model.model.{n}.lora_A.weight"] = m.lora_A.weight
        out[f"base_model.model.{n}.lora_B.weight"] = m.lora_B.weight
    return out


def hf_state_dict(model):
    """The parameters under HF's names (no lm_head when tied; no adapters)."""
    return {n: p for n, p in model.named_parameters() if ".lora_" not in n}
