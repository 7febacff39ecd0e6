"""What a study's grid costs to train, measured before it runs: per model row and task, the CPU time of
one training step at that cell's shape, times its steps, over its learning rates and seeds.

    PYTHONPATH=src python bench/study_cost.py STUDY [--scale medium] [--steps 8] [--workers 2]
        [--task LABEL ...] [--model LABEL ...] [--json FILE]

A cell's step is timed as training runs it (``statetrack.training.steps.EagerStep``: forward, the loss,
backward, clipping, AdamW; one thread) on batches drawn as training draws them, lengths across the whole
training range (a length curriculum's last stage: its earlier, shorter stages cost less, so such a cell
is overestimated). The mean process CPU time of ``--steps`` steps after two warm-up steps, not the median:
the lengths vary from step to step, and it is their sum that a run pays. Validation and the test lengths
are not included (at the medium scales they add 5-25%: a report's CPU time has them). The wall time on
``--workers`` cores is the CPU time over the workers, as runs keep every worker busy until the last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

import numpy as np
import torch

from statetrack.experiments import load_study
from statetrack.model import build_model
from statetrack.tasks import get_task
from statetrack.training import memory
from statetrack.training.loop import lr_lambda
from statetrack.training.steps import EagerStep, batches

memory.configure()


def step_seconds(cfg, steps: int) -> float:
    """Mean CPU seconds of one training step of ``cfg`` (a TrainConfig) over ``steps`` steps."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = cfg.model_copy(update={"curriculum_start": None, "device": "cpu"})
    task = get_task(cfg.task)
    model = build_model(cfg.model, task).train()
    stepper = EagerStep(model, cfg, lr_lambda(cfg))
    data = batches(task, np.random.default_rng(0), cfg, torch.device("cpu"))
    for s in range(2):  # warm-up
        stepper.step(*next(data), s + 1)
    used = 0.0
    for s in range(steps):
        x, y, m = next(data)
        t = time.process_time()
        stepper.step(x, y, m, s + 3)
        used += time.process_time() - t
    return used / steps


def shape_key(job) -> str:
    """What a step's cost depends on: the run's config without its seed and learning rate."""
    d = job.train.model_dump(mode="json")
    for k in ("seed", "lr", "init", "init_noise"):
        d.pop(k, None)
    return json.dumps(d, sort_keys=True)


def study_cost(
    name: str,
    scale: str,
    steps: int = 8,
    tasks: list[str] | None = None,
    models: list[str] | None = None,
) -> list[dict]:
    """One row per (model, task) cell of ``name`` at ``scale``: its runs, steps per run, the CPU seconds of
    a step and the CPU seconds of its runs' training."""
    study = load_study(name)
    jobs = [
        j
        for j in study.grid(scale, device="cpu")
        if (not tasks or j.column in tasks) and (not models or j.label in models)
    ]
    runs = Counter((j.label, j.column) for j in jobs)
    timed: dict[str, float] = {}
    rows, seen = [], set()
    for j in jobs:
        cell = (j.label, j.column)
        if cell in seen:
            continue
        seen.add(cell)
        key = shape_key(j)
        if key not in timed:
            timed[key] = step_seconds(j.train, steps)
        per = timed[key]
        row = {
            "model": j.label,
            "task": j.column,
            "layers": str(j.train.model.layers),
            "runs": runs[cell],
            "steps": j.train.steps,
            "cpu_ms_per_step": 1e3 * per,
            "cpu_s": per * j.train.steps * runs[cell],
        }
        rows.append(row)
        print(
            f"{row['model'][:34]:34s} {row['task'][:16]:16s} {row['runs']:3d} runs x {row['steps']:6,d} steps"
            f" x {row['cpu_ms_per_step']:7.1f} ms = {row['cpu_s'] / 3600:6.2f} CPU h",
            file=sys.stderr,
            flush=True,
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study")
    ap.add_argument("--scale", default="medium")
    ap.add_argument("--steps", type=int, default=8, help="timed steps per distinct shape (default 8)")
    ap.add_argument("--workers", type=int, default=2, help="cores the wall time is spread over (default 2)")
    ap.add_argument("--task", action="append", help="only this task column, repeatable")
    ap.add_argument("--model", action="append", help="only this model row, repeatable")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = study_cost(a.study, a.scale, a.steps, a.task, a.model)
    total = sum(r["cpu_s"] for r in rows)
    print(
        f"{a.study} at {a.scale}: {sum(r['runs'] for r in rows)} runs, training {total / 3600:.2f} CPU h, "
        f"{total / 3600 / a.workers:.2f} h on {a.workers} cores (validation and tests not included)"
    )
    if a.json:
        out = {
            "study": a.study,
            "scale": a.scale,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average": os.getloadavg(),
            "torch": torch.__version__,
            "rows": rows,
            "cpu_s": total,
        }
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
