#!/usr/bin/python3
"""Writes tests/fixtures/quant/nf4_reference.safetensors, the independent reference of zenith's
nf4 weights (tests/core/nf4_reference_test.cpp):

    /usr/bin/python3 scripts/make_nf4_fixture.py [--out tests/fixtures/quant]

Needs Debian's python3-torch and python3-numpy; the test suite itself never runs Python.

The 16 NF4 levels are derived here as bitsandbytes' create_normal_map(offset=0.9677083,
use_extra_value=True) defines them: 8 positive levels at the normal quantiles of
linspace(offset, 0.5, 9)[:-1], 7 negative ones at those of linspace(offset, 0.5, 8)[:-1], and 0,
divided by the largest; checked against the table printed in the QLoRA paper (Dettmers et al.
2023, appendix E). The 256 values of the 8-bit dynamic map are computed with torch as
bitsandbytes' create_dynamic_map(signed=True) defines them (float32, as torch rounds them).
The weight is then quantized as bitsandbytes' quantize_4bit(quant_type="nf4", blocksize=64,
compress_statistics=True) does, each row as a tensor of its own (the layout documented in
include/zenith/quant.h), in numpy float64 where the format stores nothing:

    absmax of each block of 64 (float32); each element -> the nearest level of x / absmax;
    offset = float32(mean of the absmax); per group of 256 blocks: d = float32(absmax - offset),
    scale = max |d|, code = the nearest map value to d / scale; stored absmax =
    map[code] * scale + offset (float32); element = level[q] * stored absmax (float32).

Tensors (float32 unless said):
    levels       float64 [16], the derived NF4 levels
    dynamic_map  [256], bitsandbytes' 8-bit dynamic map
    weight       [2, 16448] (257 blocks a row: two scale groups, the second of 1 block)
    dequantized  [2, 16448], level[q] * stored absmax: what zenith's blocks must decode to
    x            [2, 16448], activations
    y            float64 [2, 2], x @ dequantized^T in float64

The weight is drawn again (next seed) until no element lies within 1e-6 (relative) of a
midpoint between two levels and no absmax within 1e-6 of a midpoint of the map, so the
float32 rounding of either side cannot pick another level or code.
"""
import argparse
import json
import os

import numpy as np
import torch

PAPER_TABLE = [
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0]
ROWS, BLOCKS, N = 2, 257, 2


def nf4_levels():
    normal = torch.distributions.Normal(torch.tensor(0.0, dtype=torch.float64),
                                        torch.tensor(1.0, dtype=torch.float64))
    offset = 0.9677083

    def quantiles(steps):
        p = torch.linspace(offset, 0.5, steps)[:-1].to(torch.float64)  # float32, as bitsandbytes
        return normal.icdf(p)

    v = torch.cat([quantiles(9), torch.zeros(1, dtype=torch.float64), -quantiles(8)])
    v = torch.sort(v).values
    return (v / v.max()).numpy()


def dynamic_map():
    data = []
    for e in range(7):
        boundaries = torch.linspace(0.1, 1, 2**e + 1)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-6 + e)) * means).tolist()
        data += (-(10 ** (-6 + e)) * means).tolist()
    data += [0.0, 1.0]
    assert len(data) == 256
    return np.sort(torch.tensor(data, dtype=torch.float32).numpy())


def nearest(v, table):
    """Index of the nearest table value to each v, and the smallest distance to a midpoint."""
    t = table.astype(np.float64)
    q = np.abs(v[..., None] - t).argmin(axis=-1)
    mids = (t[1:] + t[:-1]) / 2
    return q, float(np.abs(v[..., None] - mids).min())


def quantize_row(x, levels, dmap):
    """One row: (dequantized float32 row, smallest level margin, smallest code margin)."""
    blocks = x.reshape(-1, 64)
    absmax = np.abs(blocks).max(axis=1).astype(np.float32)
    q, level_margin = nearest(blocks.astype(np.float64) / absmax.astype(np.float64)[:, None],
                              levels)
    offset = np.float32(absmax.astype(np.float64).mean())
    stored = np.empty_like(absmax)
    code_margin = 1.0
    for g in range(0, len(absmax), 256):
        d = (absmax[g:g + 256] - offset).astype(np.float32)
        scale = np.float32(np.abs(d).max())
        code, margin = nearest(d.astype(np.float64) / float(scale), dmap)
        code_margin = min(code_margin, margin)
        stored[g:g + 256] = dmap[code] * scale + offset  # float32 arithmetic
    deq = (levels[q].astype(np.float32) * stored[:, None]).astype(np.float32)
    return deq.reshape(-1), level_margin, code_margin


def draw(levels, dmap):
    for seed in range(100):
        rng = np.random.default_rng(seed)
        # Rows of different spreads, and blocks of different absmax within a row.
        w = rng.standard_normal((ROWS, BLOCKS * 64)) * 0.02
        w *= np.repeat(rng.uniform(0.5, 2.0, (ROWS, BLOCKS)), 64, axis=1)
        w = w.astype(np.float32)
        rows = [quantize_row(r, levels, dmap) for r in w]
        if min(r[1] for r in rows) > 1e-6 and min(r[2] for r in rows) > 1e-6:
            return seed, rng, w, np.stack([r[0] for r in rows])
    raise SystemExit("no seed under 100 gives a weight clear of rounding ties")


def write_safetensors(path, tensors):
    names = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                      "fixtures", "quant"))
    args = parser.parse_args()
    levels = nf4_levels()
    assert np.abs(levels - np.array(PAPER_TABLE)).max() < 1e-6, levels
    dmap = dynamic_map()
    seed, rng, w, deq = draw(levels, dmap)
    x = rng.standard_normal((N, BLOCKS * 64)).astype(np.float32)
    y = x.astype(np.float64) @ deq.astype(np.float64).T
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "nf4_reference.safetensors")
    write_safetensors(path, {"levels": levels, "dynamic_map": dmap, "weight": w, "dequantized": deq, "x": x, "y": y})
    print(f"wrote {path} (seed {seed})")


if __name__ == "__main__":
    main()
