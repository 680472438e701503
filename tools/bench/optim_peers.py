#!/usr/bin/env python3
"""Peer table for RESULTS.md: one Adam update on the CPU, octet against PyTorch and bitsandbytes.
Rows: 2^20 to 2^26 f32 parameters (one tensor), at 1 and 2 threads. Columns: ms per update and ms
per 1B parameters of
  - octet Adam with 32-bit, 8-bit and 4-bit state (build/tools/bench/octet_bench_optim --format json:
    octet's defaults, 8-bit in blocks of 256; 4-bit on a matrix of the same size, rank-1 second
    moment, and on the 1-dim tensor, all block-wise),
  - torch.optim.Adam on CPU tensors, the faster of foreach=True and fused=True (which one is noted),
  - bitsandbytes.optim.Adam8bit on CPU tensors (its CPU path: backends/cpu/ops.py, torch ops on the
    dequantized state, then the native block-wise quantizer),
  - torchao's Adam4bit and Adam8bit (torchao.prototype.low_bit_optim, torch ops on CPU tensors; its
    4-bit state is block-wise, 128, for both moments) on the same matrix as octet's 4-bit row,
and the machine's copy bandwidth (read + write, STREAM copy) measured by octet_bench_optim in the
same run at the same size and thread count.
  python3 -m pip install torch bitsandbytes torchao  # optional: a peer whose package is missing is left out
  flock /tmp/octet-build.lock cmake --build build -j2 --target octet_bench_optim
  python3 tools/bench/optim_peers.py                          # the full table (minutes, several GB)
  python3 tools/bench/optim_peers.py --log2n 20 22 --rounds 2 # a quick look

Fairness: each (size, threads) point runs ROUNDS rounds; a round times every peer once, in turn
(octet as a subprocess, then the Python peers), each as the best of REPS updates after a warm-up
update; a cell is the best over the rounds, so a burst of load on a shared machine hits every peer
alike. Threads: the whole process (and octet's subprocess) is pinned to that many CPUs
(sched_setaffinity), torch.set_num_threads and octet's --threads are set to it; so the threads
bitsandbytes' native quantizer starts (one per block) share the same CPUs.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))

try:
    import torch
except ImportError:
    torch = None
try:
    import bitsandbytes as bnb
except Exception:  # ImportError, or a broken install
    bnb = None
try:
    from torchao.prototype import low_bit_optim as torchao_optim
except Exception:
    torchao_optim = None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def physical_cores():
    try:
        out = subprocess.run(["lscpu", "-p=Core,Socket"], capture_output=True, text=True, check=True).stdout
        return len({l for l in out.splitlines() if l and not l.startswith("#")})
    except (OSError, subprocess.CalledProcessError):
        return None


def git_commit():
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def best_time(reps, fn):
    """Best-of-reps wall time of fn in seconds, after one warm-up call (as tools/bench/bench_util.h)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run_octet(bench, log2n, threads, reps, isa):
    cmd = [bench, "--log2n", str(log2n), "--threads", str(threads), "--reps", str(reps), "--optimizers", "adam",
           "--format", "json"]
    if isa:
        cmd += ["--isa", isa]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    run = next(l for l in lines if l.get("run"))
    rows = {l["name"]: l["ms"] / 1e3 for l in lines if "name" in l}
    return run, rows


class TorchAdam:
    """torch.optim.Adam on one CPU tensor, one instance per implementation variant."""

    def __init__(self, n, **variant):
        gen = torch.Generator().manual_seed(0)
        self.p = torch.randn(n, generator=gen).requires_grad_(True)
        self.p.grad = torch.randn(n, generator=gen) * 1e-3
        self.opt = torch.optim.Adam([self.p], lr=1e-3, **variant)

    def step(self):
        self.opt.step()


class BnbAdam8bit:
    def __init__(self, n):
        gen = torch.Generator().manual_seed(0)
        self.p = torch.randn(n, generator=gen).requires_grad_(True)
        self.p.grad = torch.randn(n, generator=gen) * 1e-3
        self.opt = bnb.optim.Adam8bit([self.p], lr=1e-3)
        self.opt.step()
        assert self.opt.state[self.p]["state1"].dtype == torch.uint8, "bitsandbytes did not make 8-bit state"

    def step(self):
        self.opt.step()


class TorchaoAdam:
    """torchao's low-bit Adam on a [2^(log2n // 2), rest] matrix, as octet's 4-bit row."""

    def __init__(self, log2n, cls):
        gen = torch.Generator().manual_seed(0)
        shape = (1 << (log2n // 2), 1 << (log2n - log2n // 2))
        self.p = torch.randn(shape, generator=gen).requires_grad_(True)
        self.p.grad = torch.randn(shape, generator=gen) * 1e-3
        self.opt = cls([self.p], lr=1e-3)
        self.opt.step()

    def step(self):
        self.opt.step()


def measure_point(args, log2n, threads, cpus):
    """Best times (s) of every peer at one size and thread count, over alternating rounds."""
    n = 1 << log2n
    os.sched_setaffinity(0, cpus[:threads])
    python_peers = {}
    if torch is not None:
        torch.set_num_threads(threads)
        python_peers["torch foreach"] = TorchAdam(n, foreach=True)
        try:
            python_peers["torch fused"] = TorchAdam(n, fused=True)
            python_peers["torch fused"].step()
        except (RuntimeError, TypeError) as e:  # a torch without the fused CPU kernel
            print(f"# torch fused Adam unavailable: {e}", file=sys.stderr)
            python_peers.pop("torch fused", None)
    if bnb is not None and torch is not None:
        python_peers["bnb Adam8bit"] = BnbAdam8bit(n)
    if torchao_optim is not None and torch is not None:
        python_peers["torchao Adam8bit"] = TorchaoAdam(log2n, torchao_optim.Adam8bit)
        python_peers["torchao Adam4bit"] = TorchaoAdam(log2n, torchao_optim.Adam4bit)
    best = {}
    copy_gbps, isa = 0.0, ""
    for _ in range(args.rounds):
        run, rows = run_octet(args.bench, log2n, threads, args.reps, args.isa)
        copy_gbps = max(copy_gbps, run["copy_gbps"])
        isa = run["isa"]
        for name, t in rows.items():
            best[f"octet {name}"] = min(best.get(f"octet {name}", float("inf")), t)
        for name, peer in python_peers.items():
            best[name] = min(best.get(name, float("inf")), best_time(args.reps, peer.step))
    del python_peers
    return best, copy_gbps, isa


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, nargs="+", default=list(range(20, 27)), help="sizes, as powers of two")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per point")
    ap.add_argument("--reps", type=int, default=3, help="updates per peer and round (best taken)")
    ap.add_argument("--bench", default=os.path.join(root, "build", "tools", "bench", "octet_bench_optim"))
    ap.add_argument("--isa", default="", help="octet's CPU loops (portable|avx2|avx512; default: the best)")
    args = ap.parse_args()
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"{args.bench} is missing: build it with cmake --build build --target octet_bench_optim")
    cpus = sorted(os.sched_getaffinity(0))
    if max(args.threads) > len(cpus):
        sys.exit(f"--threads {max(args.threads)}: only {len(cpus)} CPUs are available")

    results = []
    for log2n in args.log2n:
        for threads in args.threads:
            best, copy_gbps, isa = measure_point(args, log2n, threads, cpus)
            results.append((log2n, threads, best, copy_gbps, isa))
            print(f"# 2^{log2n}, {threads} thread(s): " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in best.items()),
                  file=sys.stderr)
    os.sched_setaffinity(0, cpus)

    cores = physical_cores()
    isas = sorted({r[4] for r in results})
    print("## Optimizer update: octet against PyTorch, bitsandbytes and torchao (CPU, Adam)\n")
    print(f"- **Machine:** {cpu_model()}, {len(cpus)} CPUs" + (f" ({cores} cores)" if cores else "") +
          f", octet's CPU loops {', '.join(isas)}")
    print(f"- **Commit:** {git_commit()}; Python {platform.python_version()}" +
          (f", torch {torch.__version__}" if torch is not None else ", no torch") +
          (f", bitsandbytes {bnb.__version__}" if bnb is not None else ", no bitsandbytes") +
          (f", torchao {__import__('torchao').__version__}" if torchao_optim is not None else ", no torchao"))
    print("- **Command:** `" + " ".join(["python3", "tools/bench/optim_peers.py"] + sys.argv[1:]) + "`")
    print(f"- **Method:** one update of one f32 tensor with a gradient; best over {args.rounds} rounds of "
          f"{args.reps} updates each, the rounds alternating between the peers; every peer pinned to "
          "`threads` CPUs. PyTorch: the faster of foreach and fused (f / fe). Copy: STREAM copy "
          "(read + write) by octet_bench_optim at the same size and threads, same run.\n")
    columns = ["octet Adam 32-bit", "octet Adam 8-bit", "octet Adam 4-bit", "octet Adam 4-bit, 1-dim", "torch",
               "bnb Adam8bit", "torchao Adam8bit", "torchao Adam4bit"]
    titles = ["octet 32-bit", "octet 8-bit", "octet 4-bit (matrix)", "octet 4-bit (1-dim)", "PyTorch Adam",
              "bitsandbytes Adam8bit", "torchao Adam8bit", "torchao Adam4bit (matrix)"]
    for unit, scale in (("ms per update", lambda n: 1.0), ("ms per 1B parameters", lambda n: 1e9 / n)):
        print(f"{unit}:\n")
        print("| params | threads | copy GB/s | " + " | ".join(titles) + " |")
        print("|---|---|---|" + "---|" * len(titles))
        for log2n, threads, best, copy_gbps, _ in results:
            n = 1 << log2n
            cells = []
            for col in columns:
                if col == "torch":
                    variants = {k: v for k, v in best.items() if k.startswith("torch ")}
                    if not variants:
                        cells.append("")
                        continue
                    name = min(variants, key=variants.get)
                    cells.append(f"{variants[name] * 1e3 * scale(n):.1f} ({'f' if name.endswith('fused') else 'fe'})")
                else:
                    t = best.get(col)
                    cells.append("" if t is None else f"{t * 1e3 * scale(n):.1f}")
            print(f"| 2^{log2n} | {threads} | {copy_gbps:.1f} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
