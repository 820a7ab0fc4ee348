#!/usr/bin/python3
"""PyTorch side of bench/vs_pytorch.cpp: times one workload's training step.

    /usr/bin/python3 bench/vs_pytorch.py --workload seedcnn-cifar-b64 --threads 2 \
        --warmup 3 --steps 20

Builds the same network as zenith's model zoo (scripts/make_fixtures.py), random inputs and
labels, SGD(lr 0.01, momentum 0.9) and cross entropy; times forward + backward + step, and
prints one JSON line: {"img_s", "median_ms", "steps_ms", "vmhwm_kb", "threads", "torch"}.
Run in its own process so VmHWM is this framework's peak alone.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from make_fixtures import ResNet18, seed_cnn  # noqa: E402

WORKLOADS = {
    "seedcnn-fmnist-b64": ("seedcnn", 1, 28, 64),
    "seedcnn-cifar-b64": ("seedcnn", 3, 32, 64),
    "resnet18-cifar-b32": ("resnet18", 3, 32, 32),
}


def vmhwm_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, channels, image, batch = WORKLOADS[args.workload]
    net = seed_cnn(channels, image) if model == "seedcnn" else ResNet18(channels)
    net.train()
    x = torch.randn(batch, channels, image, image)
    y = torch.randint(0, 10, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    print(json.dumps({"img_s": batch / median, "median_ms": median * 1e3,
                      "steps_ms": [t * 1e3 for t in times], "vmhwm_kb": vmhwm_kb(),
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
