"""QLoRA (zenith finetune --method qlora --quant q4_0): the PEFT adapter it writes, over the
q4_0 base decoded here from GGML's layout, gives the independent PyTorch reference
(scripts/llama_reference.py, float64) the loss zenith computes on the same quantized base,
to 1e-3 relative (zenith runs float32; measured 2.2e-4)."""
import json
import os
import subprocess
import sys

import numpy as np
import torch

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
import llama_reference as R  # noqa: E402

MODEL = os.path.join(SOURCE_DIR, "examples", "llm", "fortunes-llama")
DATA = os.path.join(SOURCE_DIR, "examples", "llm", "finetune", "train.jsonl")


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    out = {}
    for name, v in json.loads(raw[8:8 + n]).items():
        if name == "__metadata__":
            continue
        s, e = v["data_offsets"]
        a = np.frombuffer(raw[8 + n + s:8 + n + e], np.uint8)
        if v["dtype"] == "BF16":
            a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif v["dtype"] == "F32":
            a = a.view(np.float32)
        out[name] = a.reshape(v["shape"]).copy()
    return out


def dequantize_q4_0(blocks):
    """GGML q4_0: per 32 elements an f16 d and 16 bytes; byte j holds element j in its low
    nibble and element j + 16 in its high one; x = d (q - 8)."""
    rows = blocks.shape[0]
    b = blocks.reshape(rows, -1, 18)
    d = b[..., :2].copy().view(np.float16).astype(np.float64)
    q = b[..., 2:]
    lo, hi = (q & 15).astype(np.float64) - 8, (q >> 4).astype(np.float64) - 8
    return (np.concatenate([lo, hi], -1) * d).reshape(rows, -1)


def test_qlora_adapter_in_the_pytorch_reference(zenith_binary, tmp_path):
    adapter, base = str(tmp_path / "adapter"), str(tmp_path / "q4_0")
    subprocess.run([zenith_binary, "finetune", "--model", MODEL, "--data", DATA,
                    "--method", "qlora", "--quant", "q4_0", "--lora-targets", "all-linear",
                    "--lr", "3e-3", "--max-steps", "4", "--batch-size", "4", "--threads", "1",
                    "--out", adapter],
                   check=True, capture_output=True)
    subprocess.run([zenith_binary, "quantize", "--model", MODEL, "--dtype", "q4_0", "--out", base],
                   check=True, capture_output=True)
    weights = {n: torch.tensor(dequantize_q4_0(v) if v.dtype == np.uint8 else v.astype(np.float64))
               for n, v in read_safetensors(base + "/model.safetensors").items()}
    model = R.LlamaForCausalLM(R.Config(json.load(open(base + "/config.json")))).double()
    config = json.load(open(adapter + "/adapter_config.json"))
    assert config["peft_type"] == "LORA" and config["target_modules"] == "all-linear"
    targets = sorted({n.split(".")[-1] for n in R.linear_module_names(model)})
    R.add_lora(model, targets, config["r"], config["lora_alpha"])
    for n, v in read_safetensors(adapter + "/adapter_model.safetensors").items():
        weights[n.replace("base_model.model.", "", 1)] = torch.tensor(v.astype(np.float64))
    result = model.load_state_dict(weights, strict=False)
    assert not result.unexpected_keys
    assert all("inv_freq" in k for k in result.missing_keys), result.missing_keys
    assert any(float(m.lora_B.weight.abs().max()) > 0 for _, m in R.lora_modules(model))

    ids = list(range(5, 200, 3))
    with torch.no_grad():
        ref = R.causal_lm_loss(model(torch.tensor([ids])), torch.tensor([ids])).item()
    out = subprocess.run([zenith_binary, "perplexity", "--model", base, "--adapter", adapter,
                          "--ids", ",".join(map(str, ids)), "--json"],
                         check=True, capture_output=True, text=True).stdout
    nll = json.loads(out.strip().splitlines()[-1])["nll"]
    assert abs(nll - ref) <= 1e-3 * ref, (nll, ref)
