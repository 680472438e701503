"""PyTorch side of tools/bench/bench_train.cpp: the same models and the same training step
(forward, cross-entropy, backward, SGD with momentum 0.9 and weight decay 5e-4) on random inputs.

CPU (the default): MobileNetV2 CIFAR variant (stride-1 stem, first stride-2 stage at stride 1),
batch 64 of 32x32 inputs, the same thread count; one line with images/s. Needs `pip install torch`.
`--model mobilenetv2` (torchvision's ImageNet layout) or `resnet50`, with `--image N` (default 224),
for the other cases; `octet_bench_train` runs this with `--csv` between its own rounds.
    python3 tools/bench/bench_train_torch.py --threads 2 --batch 64 --steps 10 [--profile]
    python3 tools/bench/bench_train_torch.py --threads 2 --model mobilenetv2 --image 96 --batch 32
`--channels-last` runs the model and input in torch.channels_last (the default is PyTorch's NCHW).
`--bf16` runs the forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16), as
`octet_bench_train --bf16` runs octet's under AutocastGuard (train.precision: bf16).

GPU (`--device cuda`): MobileNetV2-CIFAR at batch 128 (32x32) and ResNet-50 (torchvision's layout,
stride on the 3x3 conv) at batch 64 (224x224). cudnn.benchmark is on and TF32 is off for matmuls
and convolutions, matching octet's default (train.allow_tf32: false). `octet_bench_train --device
cuda` runs this with `--model all --csv` and prints both side by side.
    python3 tools/bench/bench_train_torch.py --device cuda --model all --steps 20 --rounds 3
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


def mobilenetv2(num_classes=1000, cifar=False):
    """torchvision's MobileNetV2 (width 1.0); cifar: the stem and the 24-channel stage at stride 1."""
    stages = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
              (6, 320, 1, 1)]
    layers, cin = [conv_bn_relu6(3, 32, 3, 1 if cifar else 2)], 32
    for t, c, n, s in stages:
        for i in range(n):
            stride = (1 if cifar and c == 24 else s) if i == 0 else 1
            layers.append(Block(cin, c, stride, t))
            cin = c
    layers.append(conv_bn_relu6(cin, 1280, 1))
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
                         nn.Linear(1280, num_classes))


def mobilenetv2_cifar(num_classes=10):
    return mobilenetv2(num_classes, cifar=True)


class Bottleneck(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        cout = planes * 4
        self.body = nn.Sequential(nn.Conv2d(cin, planes, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(inplace=True),
                                  nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes),
                                  nn.ReLU(inplace=True), nn.Conv2d(planes, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        return torch.relu(self.body(x) + identity)


def resnet50(num_classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for s, n in enumerate([3, 4, 6, 3]):
        planes = 64 << s
        for i in range(n):
            layers.append(Bottleneck(cin, planes, 2 if i == 0 and s > 0 else 1))
            cin = planes * 4
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes))


# model name -> (constructor, batch on the GPU, image size, classes)
GPU_CASES = {"mobilenetv2_cifar": (mobilenetv2_cifar, 128, 32, 10), "resnet50": (resnet50, 64, 224, 1000)}
# model name -> (constructor, default image size, classes) on the CPU
CPU_MODELS = {"mobilenetv2_cifar": (mobilenetv2_cifar, 32, 10), "mobilenetv2": (mobilenetv2, 224, 1000),
              "resnet50": (resnet50, 224, 1000)}


def make_step(model, opt, x, y, bf16=False):
    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def cpu_main(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    name = "mobilenetv2_cifar" if a.model == "all" else a.model
    make, size, classes = CPU_MODELS[name]
    size = a.image or size
    model = make(classes)
    params = sum(q.numel() for q in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, 3, size, size)
    y = torch.arange(a.batch) % classes
    if a.channels_last:  # PyTorch's own channels-last mode: the model's 4-D weights and the input
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    step = make_step(model, opt, x, y, a.bf16)
    step()
    if a.profile:  # self CPU time per op (RESULTS.md's MobileNetV2 profile)
        from torch_profile import print_profile
        print_profile(step, a.steps, f"pytorch {name} train profile, {a.steps} steps, batch {a.batch}, "
                      f"{size}x{size}, {a.threads} thread(s)", rows=25)
        return
    step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    total, best = sum(times), min(times)
    if a.csv:
        print(f"RESULT,{name},{a.batch},{size},{1e3 * best:.2f},{1e3 * total / a.steps:.2f},{params}", flush=True)
        return
    layout = (", channels-last" if a.channels_last else "") + (", bf16 autocast" if a.bf16 else "")
    print(f"pytorch {torch.__version__} {name} train step{layout}, batch {a.batch}, {size}x{size}, {a.threads} thread(s): "
          f"mean {1e3 * total / a.steps:.1f} ms, best {1e3 * best:.1f} ms -> {a.batch * a.steps / total:.1f} img/s "
          f"(mean), {a.batch / best:.1f} img/s (best); {params} parameters")


def gpu_case(name, a):
    make, batch, size, classes = GPU_CASES[name]
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    model = make(classes).cuda().train()
    params = sum(q.numel() for q in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(batch, 3, size, size, device="cuda")
    y = (torch.arange(batch) % classes).cuda()
    step = make_step(model, opt, x, y)
    for _ in range(a.warmup):  # cudnn.benchmark picks its algorithms here
        step()
    rates = []
    for _ in range(a.rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        rates.append(batch * a.steps / (time.perf_counter() - t0))
    peak_mib = torch.cuda.max_memory_allocated() / 2**20
    best, mean = max(rates), sum(rates) / len(rates)
    if a.csv:
        print(f"RESULT,{name},{batch},{best:.2f},{mean:.2f},{params},{peak_mib:.1f}", flush=True)
    else:
        print(f"pytorch {name} train step on the GPU, batch {batch}, {size}x{size}: {best:.1f} img/s (best round), "
              f"{mean:.1f} img/s (mean of {a.rounds} rounds of {a.steps} steps), peak {peak_mib:.0f} MiB", flush=True)
    del model, opt, x, y, step
    torch.cuda.empty_cache()


def gpu_main(a):
    if not torch.cuda.is_available():
        raise SystemExit("bench_train_torch.py --device cuda: torch.cuda.is_available() is False")
    torch.backends.cudnn.benchmark = True
    # octet computes FP32 in FP32 unless a recipe sets train.allow_tf32: the same here.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"pytorch {torch.__version__} on {torch.cuda.get_device_name()} (CUDA {torch.version.cuda}, "
          f"cuDNN {torch.backends.cudnn.version()}): cudnn.benchmark=True, TF32 off "
          f"(backends.cuda.matmul.allow_tf32=False, backends.cudnn.allow_tf32=False)", flush=True)
    if a.model != "all" and a.model not in GPU_CASES:
        raise SystemExit(f"bench_train_torch.py --device cuda: --model is all or one of {', '.join(GPU_CASES)}")
    for name in (GPU_CASES if a.model == "all" else [a.model]):
        gpu_case(name, a)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--threads", type=int, default=2, help="cpu: intra-op threads")
    p.add_argument("--batch", type=int, default=64, help="cpu: batch size (the GPU cases have theirs)")
    p.add_argument("--steps", type=int, default=None, help="timed steps (cpu: 10; cuda: 20 per round)")
    p.add_argument("--model", choices=["all", *CPU_MODELS], default="all",
                   help="cuda: which case (all: both); cpu: which model (all: mobilenetv2_cifar)")
    p.add_argument("--image", type=int, default=None, help="cpu: input size (default: 32 for the CIFAR model, else 224)")
    p.add_argument("--rounds", type=int, default=3, help="cuda: timed rounds")
    p.add_argument("--warmup", type=int, default=5, help="cuda: warm-up steps")
    p.add_argument("--profile", action="store_true", help="cpu: print torch.profiler's per-op table instead")
    p.add_argument("--channels-last", action="store_true",
                   help="cpu: model and input in torch.channels_last (octet's MobileNetV2 runs so by default)")
    p.add_argument("--bf16", action="store_true", help="cpu: forward and loss under torch.autocast(bfloat16)")
    p.add_argument("--csv", action="store_true", help="cuda: RESULT,model,batch,best,mean,params,peak_mib lines (img/s); "
                   "cpu: one RESULT,model,batch,image,best_ms,mean_ms,params line")
    a = p.parse_args()
    if a.device == "cpu":
        a.steps = a.steps or 10
        cpu_main(a)
    else:
        a.steps = a.steps or 20
        gpu_main(a)


if __name__ == "__main__":
    main()
