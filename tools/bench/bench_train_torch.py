"""PyTorch side of tools/bench/bench_train.cpp: the same MobileNetV2 CIFAR variant (stride-1 stem,
first stride-2 stage at stride 1), batch 64 of 32x32 inputs, forward + backward + SGD step, same
thread count; prints images/s. Needs `pip install torch` (CPU); CI never runs it.
    python3 tools/bench/bench_train_torch.py --threads 2 --batch 64 --steps 10
"""
import argparse
import time

import torch
from torch import nn


def conv_bn_relu6(cin, cout, k, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class Block(nn.Module):
    def __init__(self, cin, cout, stride, t):
        super().__init__()
        hidden = cin * t
        layers = [] if t == 1 else [conv_bn_relu6(cin, hidden, 1)]
        layers += [conv_bn_relu6(hidden, hidden, 3, stride, hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


def mobilenetv2_cifar(num_classes=10):
    stages = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
              (6, 320, 1, 1)]
    layers, cin = [conv_bn_relu6(3, 32, 3, 1)], 32
    for t, c, n, s in stages:
        for i in range(n):
            stride = (1 if c == 24 else s) if i == 0 else 1
            layers.append(Block(cin, c, stride, t))
            cin = c
    layers.append(conv_bn_relu6(cin, 1280, 1))
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
                         nn.Linear(1280, num_classes))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = mobilenetv2_cifar()
    print("parameters:", sum(q.numel() for q in model.parameters()))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, 3, 32, 32)
    y = torch.arange(a.batch) % 10

    def step():
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    total, best = sum(times), min(times)
    print(f"pytorch {torch.__version__} mobilenetv2_cifar train step, batch {a.batch}, {a.threads} thread(s): "
          f"mean {1e3 * total / a.steps:.1f} ms, best {1e3 * best:.1f} ms -> {a.batch * a.steps / total:.1f} img/s "
          f"(mean), {a.batch / best:.1f} img/s (best)")


if __name__ == "__main__":
    main()
