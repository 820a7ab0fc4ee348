#!/usr/bin/python3
# The README recipe's network in PyTorch (Debian python3-torch), to compare Fashion-MNIST test
# accuracy per epoch with `zenith train`: SeedCNN 1x28x28 (convs without bias, as MindSpore's
# default), Momentum 0.9, lr 0.01, batch 64, 10 epochs, inputs normalised with mean 0.2860 and
# std 0.3530 (as src/data/registry.cpp), one thread. Prints: epoch, last step loss, accuracy, s.
#   scripts/torch_fashion_mnist.py [SEED] [cosine|constant|step|wsdD]
# step: the rate x0.1 for the last 30% of the epochs (after epoch 7 of 10); wsdD: constant, then
# linear decay to 0 over the last D epochs (zenith's --schedule wsd --decay-epochs D).
import gzip
import math
import sys
import time

import torch
import torch.nn as nn

torch.set_num_threads(1)
torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
schedule = sys.argv[2] if len(sys.argv) > 2 else "cosine"
data = "/usr/share/datasets/fashion-mnist/"


def images(name):
    raw = bytearray(gzip.open(data + name).read()[16:])
    return torch.frombuffer(raw, dtype=torch.uint8).reshape(-1, 1, 28, 28).float()


def labels(name):
    return torch.frombuffer(bytearray(gzip.open(data + name).read()[8:]), dtype=torch.uint8).long()


mean, std = 0.2860, 0.3530
x = (images("train-images-idx3-ubyte.gz") / 255.0 - mean) / std
y = labels("train-labels-idx1-ubyte.gz")
x_test = (images("t10k-images-idx3-ubyte.gz") / 255.0 - mean) / std
y_test = labels("t10k-labels-idx1-ubyte.gz")

net = nn.Sequential(nn.Conv2d(1, 32, 3, bias=False), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(32, 64, 3, bias=False), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                    nn.Linear(64 * 5 * 5, 10))
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
epochs, batch = 10, 64
steps = len(x) // batch
total = epochs * steps
schedules = {"cosine": lambda s: 0.5 * (1 + math.cos(math.pi * s / total)),
             "constant": lambda s: 1.0,
             "step": lambda s: 0.1 if s >= (epochs - epochs * 3 // 10) * steps else 1.0}
if schedule.startswith("wsd"):
    decay_start = (epochs - int(schedule[3:])) * steps
    schedules[schedule] = lambda s: 1.0 if s < decay_start else (total - s) / (total - decay_start)
scale = schedules[schedule]
lr_schedule = torch.optim.lr_scheduler.LambdaLR(opt, scale)
for epoch in range(epochs):
    net.train()
    order = torch.randperm(len(x))
    start = time.time()
    for i in range(steps):
        idx = order[i * batch:(i + 1) * batch]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
        lr_schedule.step()
    net.eval()
    with torch.no_grad():
        accuracy = (net(x_test).argmax(1) == y_test).float().mean().item()
    print(epoch + 1, round(loss.item(), 4), accuracy, round(time.time() - start, 1), flush=True)
