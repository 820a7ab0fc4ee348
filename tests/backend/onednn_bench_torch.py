#!/usr/bin/python3
"""PyTorch side of tests/backend/onednn_bench_test.cpp: the same layer shapes and train steps.

    /usr/bin/python3 tests/backend/onednn_bench_torch.py [--threads 2] [--clock wall|cpu]
        [--stat median|min]

--clock cpu times process CPU time (meaningful single-threaded on a loaded machine).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--stat", choices=["median", "min"], default="median")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    def median_ms(f, reps=20, warmup=3):
        for _ in range(warmup):
            f()
        t = []
        for _ in range(reps):
            s = clock()
            f()
            t.append((clock() - s) * 1e3)
        return min(t) if args.stat == "min" else sorted(t)[len(t) // 2]

    x = torch.randn(64, 1, 28, 28)
    c1, c2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
    x2 = torch.randn(64, 32, 13, 13, requires_grad=True)

    def fb(f):
        def g():
            y = f()
            y.backward(torch.ones_like(y))
        return g

    with torch.no_grad():
        print(f"conv1 1->32 28x28 b64: fwd {median_ms(lambda: c1(x)):.3f} ms")
        print(f"conv2 32->64 13x13 b64: fwd {median_ms(lambda: c2(x2)):.3f} ms")
    print(f"conv1 fwd+bwd(weights) {median_ms(fb(lambda: c1(x))):.3f} ms")
    print(f"conv2 fwd+bwd(data+weights) {median_ms(fb(lambda: c2(x2))):.3f} ms")
    fc = nn.Linear(1600, 10)

    def layers():
        h = F.max_pool2d(F.relu(c1(x)), 2)
        h = F.max_pool2d(F.relu(c2(h)), 2)
        return fc(h.flatten(1))
    print(f"seedcnn layers fwd+bwd: {median_ms(fb(layers)):.3f} ms")

    for C, H in [(64, 32), (128, 16), (256, 8), (512, 4)]:
        xx = torch.randn(32, C, H, H, requires_grad=True)
        conv = nn.Conv2d(C, C, 3, padding=1, bias=False)
        bn = nn.BatchNorm2d(C)
        with torch.no_grad():
            fwd = median_ms(lambda: conv(xx), 10)
        block = median_ms(fb(lambda: F.relu(bn(conv(xx)))), 10)
        print(f"resnet C={C} H={H} b32: conv fwd {fwd:.2f} ms; conv+bn+relu fwd+bwd {block:.2f} ms")

    def seed_cnn(c, s):
        return nn.Sequential(nn.Conv2d(c, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * s * s, 10))

    def step_bench(name, net, xb, reps):
        yb = torch.randint(0, 10, (xb.shape[0],))
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

        def step():
            opt.zero_grad()
            F.cross_entropy(net(xb), yb).backward()
            opt.step()
        ms = median_ms(step, reps)
        print(f"{name} train step: {ms:.2f} ms ({xb.shape[0] / ms * 1e3:.0f} img/s)")

    step_bench("seedcnn 1x28x28 b64", seed_cnn(1, 5), torch.randn(64, 1, 28, 28), 20)
    step_bench("seedcnn 3x32x32 b64", seed_cnn(3, 6), torch.randn(64, 3, 32, 32), 20)
    try:
        import sys, os
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "scripts"))
        from make_fixtures import ResNet18
        step_bench("resnet18 3x32x32 b32", ResNet18(), torch.randn(32, 3, 32, 32), 5)
    except ImportError as e:
        print("resnet18: skipped,", e)


if __name__ == "__main__":
    main()
