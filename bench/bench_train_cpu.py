"""The training step on the CPU at the medium scales' shapes: sequences per second by batch size and thread
count, the numbers behind the medium scales' batch sizes and worker counts (docs/benchmarks.md, "Training
on the CPU").

    PYTHONPATH=src python bench/bench_train_cpu.py [--json FILE] [--batches 32,64,128,256] [--threads 1,2]
        [--models NAME ...] [--steps N]

One row per (model, batch, threads): the median wall time (and the process's CPU time, which a machine
shared with other work inflates less) of a training step (forward, the loss on every
position, backward, clipping, AdamW; ``statetrack.training.steps.EagerStep``) over ``--steps`` steps after warm-up,
at lengths drawn from 3-40 as in training (the same draws for every row), and the sequences and tokens per
second it makes. ``torch.compile`` is timed for one model where ``--compile`` is given (its compile time is
reported apart: lengths vary per step, so each new length compiles again).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np
import torch

from statetrack.config import ModelConfig, TrainConfig
from statetrack.model import build_model
from statetrack.tasks import get_task
from statetrack.training import memory
from statetrack.training.loop import lr_lambda
from statetrack.training.steps import EagerStep, batches

memory.configure()

#: the medium scales' shapes: label -> (task, layers, d_model, d_state)
MODELS = {
    "sLSTM x2, modarith": ("modarith:5", "slstm*2", 64, 64),
    "DeltaNet [-1,1] x3, modarith": ("modarith:5", "deltanet(neg=true,heads=4,conv=0)*3", 64, 16),
    "Mamba [-1,1] x3, modarith": ("modarith:5", "negmamba(conv=0)*3", 64, 16),
    "Mamba-3, parity": ("parity", "mamba3", 32, 16),
    "RNN, modarith": ("modarith:5", "rnn", 64, 128),
    "LSTM, modarith": ("modarith:5", "lstm", 64, 128),
}


#: the rows whose blocks have an MLP sub-block
MLP = {"DeltaNet [-1,1] x3, modarith"}


def time_steps(label: str, batch: int, threads: int, steps: int, compile_model: bool = False) -> dict:
    task_name, layers, d, n = MODELS[label]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    task = get_task(task_name)
    cfg = TrainConfig(
        task=task_name,
        model=ModelConfig(layers=layers, d_model=d, d_state=n),
        train_min_len=3,
        train_max_len=40,
        steps=10**6,
        batch_size=batch,
        lr=1e-3,
        device="cpu",
        supervision="every" if task.scoring != "every" else "task",
    )
    model = build_model(cfg.model, task).train()
    if label in MLP:
        model = build_model(cfg.model.model_copy(update={"mlp": True}), task).train()
    t_compile = None
    if compile_model:
        t = time.perf_counter()
        model = torch.compile(model, dynamic=True)
        stepper = EagerStep(model, cfg, lr_lambda(cfg))
        stepper.step(*next(batches(task, np.random.default_rng(1), cfg, torch.device("cpu"))), 1)
        t_compile = time.perf_counter() - t
    stepper = EagerStep(model, cfg, lr_lambda(cfg))
    data = batches(task, np.random.default_rng(0), cfg, torch.device("cpu"))
    for s in range(3):  # warm-up
        stepper.step(*next(data), s + 1)
    times, cpu, tokens = [], [], 0
    for s in range(steps):
        x, y, m = next(data)
        t, c = time.perf_counter(), time.process_time()
        stepper.step(x, y, m, s + 4)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        tokens += x.numel()
    per_step = statistics.median(times)
    mean_len = tokens / steps / batch
    row = {
        "model": label,
        "layers": layers,
        "d_model": d,
        "d_state": n,
        "batch": batch,
        "threads": threads,
        "ms_per_step": 1e3 * per_step,
        "cpu_ms_per_step": 1e3 * statistics.median(cpu),
        "kernels": os.environ.get("STATETRACK_KERNELS", "1"),
        "sequences_per_s": batch / per_step,
        "tokens_per_s": batch * mean_len / per_step,
        "compiled": compile_model,
        "compile_s": t_compile,
    }
    print(
        f"{label:32s} batch {batch:4d} threads {threads}: {1e3 * per_step:7.1f} ms/step "
        f"({1e3 * statistics.median(cpu):7.1f} ms of CPU), "
        f"{batch / per_step:7.0f} sequences/s"
        + (f" (compiled; {t_compile:.0f} s to compile)" if compile_model else ""),
        flush=True,
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--batches", default="32,64,128,256")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile on the first model")
    a = ap.parse_args()
    rows = []
    for label in a.models:
        for threads in (int(x) for x in a.threads.split(",")):
            for batch in (int(x) for x in a.batches.split(",")):
                rows.append(time_steps(label, batch, threads, a.steps))
    if a.compile:
        rows.append(time_steps(a.models[0], 64, 1, a.steps, compile_model=True))
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "torch": torch.__version__,
        "rows": rows,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
