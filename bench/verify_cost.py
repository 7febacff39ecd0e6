"""Time of the exhaustive check (every string up to the budget's length) per mixer, one thread.

    python bench/verify_cost.py [--task tomita:3] [--layers rnn,mamba(conv=0),...] [--budget 4194304]

Random weights (the walk's cost does not depend on them), d_model 16, d_state 16 (the frontier zoo's
quick widths). Prints one line per mixer: the length reached, the nodes stepped, seconds.
"""

from __future__ import annotations

import argparse
import time

import torch

from statetrack.config import ModelConfig
from statetrack.model import build_model
from statetrack.tasks import get_task
from statetrack.training.verify import BUDGET, exhaustive_check

DEFAULT = (
    "rnn;lstm;transformer;mamba(conv=0);negmamba(conv=0);mamba3;gla;deltanet(conv=0,neg=true);"
    "deltaproduct(conv=0,neg=true);gateddeltaproduct(conv=0,neg=true);kda(conv=0);lru;pdssm"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="tomita:3")
    ap.add_argument("--layers", default=DEFAULT, help="specs separated by ';'")
    ap.add_argument("--budget", type=int, default=BUDGET)
    ap.add_argument("--d-model", type=int, default=16)
    a = ap.parse_args()
    torch.set_num_threads(1)
    task = get_task(a.task)
    for spec in a.layers.split(";"):
        torch.manual_seed(0)
        model = build_model(ModelConfig(layers=spec, d_model=a.d_model, d_state=16), task).eval()
        t0 = time.perf_counter()
        ex, _, _ = exhaustive_check(model, task, budget=a.budget)
        print(
            f"{spec:40s} L_ex {ex.max_len:3d}  nodes {ex.nodes:>10,}  {time.perf_counter() - t0:6.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
