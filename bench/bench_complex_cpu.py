"""The complex layers' training step on the CPU with their C kernel against their PyTorch form, alternating
in one process on the same batches (docs/benchmarks.md, "The complex scan with its readout").

    PYTHONPATH=src python bench/bench_complex_cpu.py [--steps 12] [--layers aussm saussm dcd aussm*2]

Width 32, state 16, batch 64, the word problem of C6 at lengths 1-60 (diag-limits-2026's medium shapes),
one thread. Per layer: the mean process CPU time of ``--steps`` steps of each form after two warm-up steps
(the form that goes first alternates, so neither gets the other's warm caches), and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from statetrack.config import ModelConfig, TrainConfig
from statetrack.model import build_model
from statetrack.ops.dispatch import ENV
from statetrack.tasks import get_task
from statetrack.training import memory
from statetrack.training.loop import lr_lambda
from statetrack.training.steps import EagerStep, batches

memory.configure()


def compare(layers: str, steps: int) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    task = get_task("group:C6")
    cfg = TrainConfig(
        task="group:C6",
        model=ModelConfig(layers=layers, d_model=32, d_state=16),
        train_min_len=1,
        train_max_len=60,
        steps=10**6,
        batch_size=64,
        lr=1e-3,
        device="cpu",
    )
    stepper = EagerStep(build_model(cfg.model, task).train(), cfg, lr_lambda(cfg))
    data = batches(task, np.random.default_rng(0), cfg, torch.device("cpu"))
    used: dict[str, list[float]] = {"0": [], "1": []}  # STATETRACK_KERNELS: PyTorch form, kernel
    for s in range(steps + 2):
        x, y, m = next(data)
        for form in ("0", "1") if s % 2 else ("1", "0"):
            os.environ[ENV] = form
            t = time.process_time()
            stepper.step(x, y, m, s + 1)
            if s >= 2:
                used[form].append(time.process_time() - t)
    os.environ.pop(ENV, None)
    torch_ms, kernel_ms = (1e3 * statistics.mean(used[f]) for f in ("0", "1"))
    print(
        f"{layers}: PyTorch form {torch_ms:.1f} ms, C kernel {kernel_ms:.1f} ms of CPU per step "
        f"({torch_ms / kernel_ms:.2f}x)"
    )
    return {"layers": layers, "torch_ms": torch_ms, "kernel_ms": kernel_ms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--layers", nargs="*", default=["aussm", "saussm", "dcd", "aussm*2"])
    a = ap.parse_args()
    for layers in a.layers:
        compare(layers, a.steps)


if __name__ == "__main__":
    main()
