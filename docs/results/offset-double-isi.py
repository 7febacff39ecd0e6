"""Why a trained S4D does not anticipate the second ISI of the double-ISI probe (khavari2025-offset): for each
complete run of the study in a database, what it predicts over the 20 ones of the probe, and the modes of its
transition near the ISI's period of 10 steps (period 2 pi / angle, modulus |lambda|).

    PYTHONPATH=src python docs/results/offset-double-isi.py runs/offset.db > docs/results/offset-double-isi.md
"""
from __future__ import annotations

import math
import sys

import numpy as np
import torch

from statetrack.checkpoint import load_checkpoint
from statetrack.store import Store
from statetrack.tasks import get_task


def main(db: str) -> None:
    task = get_task("offset:double-isi")
    b = task.sample_batch(np.random.default_rng(0), 1, 200)
    x = torch.as_tensor(b.inputs)
    inp, tg = b.inputs[0], b.targets[0]
    ones = np.where(inp == 1)[0]
    print("# The double ISI: what each trained model predicts over the 20 ones, and its modes near period 10\n")
    print(f"Database `{db}` (the runs of `statetrack reproduce khavari2025-offset --scale quick`); probe: one "
          "double ISI (20 ones in a row) in a sequence of 200. P(1) is the model's probability that the ISI "
          "goes on, at each of the 20 ones (target: 1 for all but the 10th and the 20th). Modes: eigenvalues "
          "of A(x) after a 1 with period 2 pi / |angle| between 8 and 12 steps, as (period, modulus); S4D's "
          "transition does not depend on the input.\n")
    print("| run | model | seed | holds of the 2nd ISI | P(1) over the 20 ones | modes of period 8-12 |")
    print("|---|---|---|---|---|---|")
    for r in Store(db, readonly=True).runs():
        if r["status"] != "complete":
            continue
        model, _, _, _ = load_checkpoint(r["checkpoint"])
        with torch.no_grad():
            p = model(x)[0].softmax(-1)[0, :, 1].numpy()
            block = model.blocks[0]
            ev = block.mixer.eigenvalues(block.norm(model.embed(torch.tensor([[1]]))))[0, 0]
        second = [i for i in ones[10:] if tg[i] == 1]
        holds = np.mean([p[i] > 0.5 for i in second])
        modes = []
        for e in ev:
            ang = abs(float(torch.angle(e)))
            if ang > 1e-6 and 8 < 2 * math.pi / ang < 12:
                modes.append(f"({2 * math.pi / ang:.1f}, {abs(complex(e)):.3f})")
        print(f"| {r['id']} | {r['label']} | {r['seed']} | {100 * holds:.0f}% | {' '.join(f'{p[i]:.2f}' for i in ones)} "
              f"| {' '.join(modes) or '-'} |")


if __name__ == "__main__":
    main(sys.argv[1])
