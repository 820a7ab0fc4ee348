#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tests/models/pytorch_parity_test.cpp reads.

    /usr/bin/python3 scripts/make_fixtures.py [--out tests/fixtures]

Needs Debian's python3-torch (1.13) and python3-numpy; the test suite itself never runs Python.
Every network is built with the same architecture and parameter names as zenith's model zoo,
in float32, and run in training mode (batch norm on batch statistics):

  seedcnn_cifar.safetensors   SeedCNN 3x32x32, batch 8: PyTorch-initialised weights, input,
  seedcnn_fmnist.safetensors  labels, logits, loss, every parameter gradient, and the loss
                              after each of 10 Momentum(lr 0.01, momentum 0.9) steps on that batch.
  resnet18_cifar.safetensors  ResNet-18 (CIFAR stem), batch 2. The 44 MB of weights are not
                              stored: both sides generate them from splitmix64 (resnet_weight
                              below, mirrored in the C++ test). Stored: input, labels, logits,
                              loss, each gradient's L2 norm and 8 sampled entries, running
                              statistics after the step and eval-mode logits; and the same
                              logits, loss and gradients computed in float64 ("f64." names).

Files are safetensors written by hand: 8-byte little-endian header length, a JSON header
{name: {dtype, shape, data_offsets}, "__metadata__": {...}} padded with spaces to 8 bytes,
then the raw little-endian data.
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch
from torch import nn

DTYPES = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64"}


def save_safetensors(path, tensors, metadata):
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        a = np.array(tensors[name], order="C")  # keeps 0-d arrays 0-d
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        raw = a.tobytes()
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(tensors)} tensors)")


def np32(t):
    return t.detach().cpu().numpy().astype(np.float32)


# ---- SeedCNN: zenith's models::seed_cnn (MindSpore defaults: convs without bias).
def seed_cnn(in_channels, image_size, num_classes=10):
    s = ((image_size - 2) // 2 - 2) // 2
    return nn.Sequential(
        nn.Conv2d(in_channels, 32, 3, bias=False), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, bias=False), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * s * s, num_classes))


def make_seedcnn(out_dir, name, in_channels, image_size, seed, batch=8, steps=10):
    torch.manual_seed(seed)
    net = seed_cnn(in_channels, image_size)
    x = torch.randn(batch, in_channels, image_size, image_size)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()
    tensors = {"input": np32(x), "labels": y.numpy().astype(np.int64)}
    for k, v in net.state_dict().items():
        tensors["weight." + k] = np32(v)
    logits = net(x)
    loss = loss_fn(logits, y)
    loss.backward()
    tensors["logits"] = np32(logits)
    tensors["loss"] = np.array(loss.item(), dtype=np.float32)
    for k, p in net.named_parameters():
        tensors["grad." + k] = np32(p.grad)
    # Momentum steps on the same batch; momentum_losses[i] is the loss after i steps.
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    losses = [loss.item()]
    for _ in range(steps):
        opt.step()
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        losses.append(loss.item())
    tensors["momentum_losses"] = np.array(losses, dtype=np.float32)
    save_safetensors(os.path.join(out_dir, name), tensors, {
        "model": f"seed_cnn({in_channels}, {image_size}, 10)", "seed": seed,
        "momentum": "lr=0.01 momentum=0.9 steps=10", "torch": torch.__version__,
        "script": "scripts/make_fixtures.py"})


# ---- ResNet-18, CIFAR stem, torchvision's parameter names.
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = self.downsample(x) if self.downsample is not None else x
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, in_channels=3, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        cin = 64
        for i, width in enumerate([64, 128, 256, 512]):
            blocks = []
            for b in range(2):
                stride = 2 if i > 0 and b == 0 else 1
                blocks.append(BasicBlock(cin, width, stride))
                cin = width
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        for i in range(4):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


MASK64 = (1 << 64) - 1


def splitmix64(z):
    """splitmix64's output function on a uint64 array (wrapping arithmetic)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hash_uniform(n, stream):
    """n values in [-1, 1): splitmix64(i + stream * 2^32) -> 53-bit fraction, exactly as in C++."""
    i = np.arange(n, dtype=np.uint64) + np.uint64((stream << 32) & MASK64)
    with np.errstate(over="ignore"):
        h = splitmix64(i)
    return (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 * 2.0 - 1.0


def resnet_weight(name, shape, k):
    """Weight k (named_parameters order) of the deterministic ResNet: see the C++ mirror."""
    n = int(np.prod(shape))
    u = hash_uniform(n, k + 1)
    if len(shape) == 4:  # conv: He-uniform bound sqrt(6 / fan_in)
        v = u * math.sqrt(6.0 / (shape[1] * shape[2] * shape[3]))
    elif name.endswith("fc.weight") or name.endswith("fc.bias"):
        v = u / math.sqrt(512.0)
    elif name.endswith(".weight"):  # batch-norm scale
        v = 1.0 + 0.2 * u
    else:  # batch-norm shift
        v = 0.2 * u
    return v.astype(np.float32).reshape(shape)


def sample_indices(n, k, count=8):
    """`count` element indices of parameter k: the first and last, then hashed ones."""
    h = splitmix64(np.arange(count - 2, dtype=np.uint64) + np.uint64((1000 + k) << 32))
    picks = (h % np.uint64(n)).astype(np.int64)
    return np.concatenate([[0, n - 1], picks]).astype(np.int64)


# The input is hash_uniform(stream INPUT_STREAM). A ReLU input within rounding error of zero
# flips between float32 implementations; in layer4 the flip moves a whole channel's gradient
# (average pooling sends every position the same gradient), so the fixture would test rounding
# luck. Stream 1021 keeps every layer4 ReLU input at least 1.5e-5 * max|x| away from zero
# (searched over streams 999..1040; checked below), 30x the float32 error seen there.
INPUT_STREAM = 1021
LAYER4_MIN_MARGIN = 1e-5


def run_resnet(dtype, x, y):
    """Forward (training mode), loss and backward; returns the net, logits, loss, and the
    smallest |ReLU input| / max|ReLU input| over layer4's ReLU calls."""
    net = ResNet18()
    with torch.no_grad():
        for k, (pname, p) in enumerate(net.named_parameters()):
            p.copy_(torch.from_numpy(resnet_weight(pname, tuple(p.shape), k)))
    net = net.to(dtype)
    margins = []

    def hook(module, inputs, output):
        v = inputs[0].detach().abs()
        margins.append((v.min() / v.max()).item())

    for name, m in net.named_modules():
        if name.startswith("layer4") and isinstance(m, nn.ReLU):
            m.register_forward_hook(hook)
    net.train()
    logits = net(x.to(dtype))
    loss = nn.CrossEntropyLoss()(logits, y)
    loss.backward()
    return net, logits, loss, min(margins)


def make_resnet(out_dir, name="resnet18_cifar.safetensors", batch=2):
    x = torch.from_numpy(hash_uniform(batch * 3 * 32 * 32, INPUT_STREAM).astype(np.float32)
                         .reshape(batch, 3, 32, 32))
    y = torch.tensor([3, 7][:batch], dtype=torch.int64)
    net, logits, loss, _ = run_resnet(torch.float32, x, y)
    net64, logits64, loss64, margin = run_resnet(torch.float64, x, y)
    assert margin > LAYER4_MIN_MARGIN, f"layer4 ReLU margin {margin:.2e} too small"
    tensors = {"input": np32(x), "labels": y.numpy(), "logits": np32(logits),
               "loss": np.array(loss.item(), dtype=np.float32),
               "f64.logits": logits64.detach().numpy(),
               "f64.loss": np.array(loss64.item(), dtype=np.float64)}
    worst = 0.0  # PyTorch's own float32 error, in the units of the test's tolerance
    grads64 = dict(net64.named_parameters())
    for k, (pname, p) in enumerate(net.named_parameters()):
        g = p.grad.detach().double().flatten()
        g64 = grads64[pname].grad.detach().flatten()
        idx = sample_indices(g.numel(), k)
        tensors["grad_norm." + pname] = np.array(g.norm().item(), dtype=np.float64)
        tensors["grad_idx." + pname] = idx
        tensors["grad_val." + pname] = g.numpy()[idx].astype(np.float32)
        tensors["f64.grad_norm." + pname] = np.array(g64.norm().item(), dtype=np.float64)
        tensors["f64.grad_val." + pname] = g64.numpy()[idx]
        n64 = g64.norm().item()
        worst = max(worst, abs(g.norm().item() - n64) / (1e-4 * n64),
                    float(((g[idx] - g64[idx]).abs() / (1e-4 * g64[idx].abs() + 1e-5 * n64)).max()))
    assert worst < 0.5, f"PyTorch float32 vs float64 uses {worst:.2f} of the test tolerance"
    buffers = dict(net.named_buffers())
    for b in ["bn1.running_mean", "bn1.running_var", "layer4.1.bn2.running_mean",
              "layer4.1.bn2.running_var"]:
        tensors["buffer." + b] = np32(buffers[b])
    net.eval()
    with torch.no_grad():
        tensors["logits_eval"] = np32(net(x))
    print(f"resnet18: layer4 ReLU margin {margin:.2e}; PyTorch float32 vs float64 uses "
          f"{worst:.3f} of the gradient tolerance")
    save_safetensors(os.path.join(out_dir, name), tensors, {
        "model": "resnet18(3, 10), CIFAR stem", "weights": "splitmix64 formula, see script",
        "input_stream": INPUT_STREAM, "layer4_relu_margin": f"{margin:.3e}",
        "params": sum(p.numel() for p in net.parameters()), "torch": torch.__version__,
        "param_order": ",".join(n for n, _ in net.named_parameters()),
        "script": "scripts/make_fixtures.py"})


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # reproducible reductions
    make_seedcnn(args.out, "seedcnn_cifar.safetensors", 3, 32, seed=0)
    make_seedcnn(args.out, "seedcnn_fmnist.safetensors", 1, 28, seed=1)
    make_resnet(args.out)


if __name__ == "__main__":
    main()
