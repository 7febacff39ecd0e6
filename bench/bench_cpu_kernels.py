"""The CPU's C kernel for Mamba's scan (ops/mamba/mamba_scan.c) against the PyTorch forms it replaces.

    PYTHONPATH=src python bench/bench_cpu_kernels.py [--reps 5] [--json out.json]

Two rows per eigenvalue domain, each with ``STATETRACK_KERNELS=1`` (the C kernel) and ``0`` (the
PyTorch loops of ops/mamba/scan.py), one torch thread, float32, minimum over ``--reps`` after a warm-up:

* scan: ``mamba_scan`` forward + backward at a language model's shape, batch 16 x length 256, 360
  channels (width 180, expand 2), state 16;
* step: one training step (forward, loss, backward, AdamW) of grazzi2024-lm's medium Mamba: 2 layers,
  width 180, BPE vocabulary 2,048, batch 16 x 256 tokens;
* eval: ``mamba_scan`` without gradients, batch 32 x length 1,024 (the evaluation loop).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch
import torch.nn.functional as F

from statetrack.config import ModelConfig
from statetrack.model import Model
from statetrack.ops import mamba_scan
from statetrack.training import memory

memory.configure()


def _best(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def _scan_inputs(B, T, E, N, grad: bool):
    g = torch.Generator().manual_seed(0)
    dt = torch.rand(B, T, E, generator=g) * 0.1
    A = -torch.arange(1, N + 1, dtype=torch.float32).repeat(E, 1)
    u, Bm, Cm = (torch.randn(*s, generator=g) for s in ((B, T, E), (B, T, N), (B, T, N)))
    ins = [dt, A, u, Bm, Cm]
    return [t.requires_grad_(grad) for t in ins]


def scan_ms(neg: bool, reps: int) -> float:
    ins = _scan_inputs(16, 256, 360, 16, True)
    w = torch.randn(16, 256, 360)

    def run():
        y, _ = mamba_scan(*ins, neg=neg)
        torch.autograd.grad((y * w).sum(), ins)

    return _best(run, reps)


def eval_ms(neg: bool, reps: int) -> float:
    ins = _scan_inputs(32, 1024, 360, 16, False)

    def run():
        with torch.no_grad():
            mamba_scan(*ins, neg=neg)

    return _best(run, reps)


def step_ms(neg: bool, reps: int) -> float:
    torch.manual_seed(0)
    layer = "negmamba" if neg else "mamba"
    model = Model(ModelConfig(layers=f"{layer},{layer}", d_model=180, d_state=16), 2048, 2048)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 2048, (16, 256))

    def run():
        logits, _ = model(x)
        F.cross_entropy(logits.flatten(0, 1), x.flatten()).backward()
        opt.step()
        opt.zero_grad()

    return _best(run, reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    print(
        f"{platform.processor() or platform.machine()}, nproc {os.cpu_count()}, torch {torch.__version__}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print("| row | domain | C kernel ms | PyTorch forms ms | x faster |\n|---|---|---:|---:|---:|")
    for name, fn in (
        ("scan fwd+bwd (16, 256, 360, 16)", scan_ms),
        ("training step, 2 layers, width 180", step_ms),
        ("scan, no gradients (32, 1024, 360, 16)", eval_ms),
    ):
        for neg in (False, True):
            ms = {}
            for flag in ("1", "0"):
                os.environ["STATETRACK_KERNELS"] = flag
                ms[flag] = fn(neg, args.reps)
            os.environ.pop("STATETRACK_KERNELS")
            rows.append({"row": name, "neg": neg, "c_ms": ms["1"], "pytorch_ms": ms["0"]})
            print(
                f"| {name} | {'[-1,1]' if neg else '[0,1]'} | {ms['1']:.0f} | {ms['0']:.0f} | "
                f"{ms['0'] / ms['1']:.1f}x |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "torch": torch.__version__, "nproc": os.cpu_count()}, f, indent=1)


if __name__ == "__main__":
    main()
