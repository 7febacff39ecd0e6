"""Why modular arithmetic trained on its answer alone gives no learning signal (docs/learnability.md).

    PYTHONPATH=src python docs/results/modarith-signal.py [--samples 200000] [--json FILE]

1. What a window can know: the best accuracy of any predictor of the answer of ``modarith:5`` that reads
   only the last k tokens, by length L (the majority answer of each window's class over ``--samples``
   draws, scored on a second set of draws: an estimate of the Bayes rate, slightly optimistic for k = 8).
2. The gradient's signal by length: for a model trained ``--steps`` steps on the answer alone (past the
   first phase, in which the head learns the answers' marginal and every batch's gradient agrees on
   that), the cosine between the gradients of two independent batches of length L (a direction the data
   agree on gives a cosine well above 0, noise about 0), with the loss on the answer alone and on every
   prefix's answer (``supervision: every``).
"""
from __future__ import annotations

import argparse
import json
import math
from collections import Counter, defaultdict

import numpy as np
import torch

from statetrack.config import ModelConfig
from statetrack.model import build_model
from statetrack.steps import masked_loss
from statetrack.tasks import get_task

LENGTHS = (3, 5, 9, 17, 33)
WINDOWS = (1, 2, 4, 8)
MODELS = {"LSTM": ("lstm", 64, 128), "sLSTM x2": ("slstm*2", 64, 64),
          "DeltaNet [-1,1] x3": ("deltanet(neg=true,conv=0)*3", 64, 64), "Mamba [-1,1] x3": ("negmamba(conv=0)*3", 64, 16)}


def window_accuracy(task, length: int, k: int, n: int, rng) -> float:
    fit = task.sample_batch(rng, n, length)
    test = task.sample_batch(rng, n, length)
    counts: dict = defaultdict(Counter)
    for x, y in zip(fit.inputs[:, -k:].tolist(), fit.targets[:, -1].tolist(), strict=True):
        counts[tuple(x)][y] += 1
    best = {w: c.most_common(1)[0][0] for w, c in counts.items()}
    overall = Counter(fit.targets[:, -1].tolist()).most_common(1)[0][0]
    hits = sum(best.get(tuple(x), overall) == y for x, y in zip(test.inputs[:, -k:].tolist(),
                                                               test.targets[:, -1].tolist(), strict=True))
    return hits / n


def plateau_model(layers: str, d: int, n: int, task, steps: int, seed: int = 0):
    """A model trained on the answer alone for ``steps`` steps (lengths 3-40, batch 64, lr 3e-3): past the
    first phase, where the head learns the answers' marginal and every gradient agrees on it."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig(layers=layers, d_model=d, d_state=n), task)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0)
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        b = task.sample_batch(rng, 64, int(rng.integers(3, 41)))
        logits, _ = model(torch.as_tensor(b.inputs))
        loss = masked_loss(logits, torch.as_tensor(b.targets), torch.as_tensor(b.mask))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, float(np.mean(losses[-50:]))


def gradient_cosine(model, task, length: int, every: bool, seed: int = 1) -> float:
    """The cosine between the gradients (of the blocks' parameters) of two independent batches of 256
    sequences of this length."""
    rng = np.random.default_rng(seed)
    grads = []
    for _ in range(2):
        b = task.sample_batch(rng, 256, length)
        x, y = torch.as_tensor(b.inputs), torch.as_tensor(b.targets)
        m = torch.ones_like(y, dtype=torch.bool) if every else torch.as_tensor(b.mask)
        model.zero_grad()
        logits, _ = model(x)
        masked_loss(logits, y, m).backward()
        # the blocks' parameters only: the head's gradient at the plateau follows each batch's answer counts
        grads.append(torch.cat([p.grad.flatten() for p in model.blocks.parameters() if p.grad is not None]))
    return float(torch.nn.functional.cosine_similarity(grads[0], grads[1], dim=0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--steps", type=int, default=500, help="steps on the answer alone before the gradients")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    task = get_task("modarith:5")
    rng = np.random.default_rng(0)
    out: dict = {"window_accuracy": {}, "gradients": {}, "ln5": math.log(5)}
    print("best accuracy from the last k tokens (chance 20%):")
    print("length " + " ".join(f"k={k:<5d}" for k in WINDOWS))
    for n in LENGTHS:
        row = {k: window_accuracy(task, n, k, a.samples, rng) for k in WINDOWS if k <= n}
        out["window_accuracy"][n] = row
        print(f"{n:6d} " + " ".join(f"{100 * row[k]:6.1f}" if k in row else "     -" for k in WINDOWS))
    print(f"\nafter {a.steps} steps on the answer alone: its loss (ln 5 = {math.log(5):.3f}), then the cosine "
          "between two batches' gradients by length, answer only / every prefix:")
    for label, (layers, d, ns) in MODELS.items():
        model, plateau = plateau_model(layers, d, ns, task, a.steps)
        row = {n: {"answer_only": gradient_cosine(model, task, n, every=False),
                   "every_prefix": gradient_cosine(model, task, n, every=True)} for n in LENGTHS}
        out["gradients"][label] = {"loss_after": plateau, "cosine": row}
        print(f"{label:20s} loss {plateau:.3f}  " + "  ".join(
            f"L={n}: {c['answer_only']:+.2f} / {c['every_prefix']:+.2f}" for n, c in row.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
