"""What a group-tracking checkpoint confuses: the confusion matrix of its final answer on strings of the
training draw, with the group's element names.

    python docs/results/c2xc4-confusion.py CHECKPOINT [...] [--length 60] [--n 512]

Reads the checkpoints only; nothing is trained or written but stdout.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from statetrack.training.checkpoint import load_checkpoint


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", nargs="+")
    ap.add_argument("--length", type=int, default=60)
    ap.add_argument("--n", type=int, default=512)
    a = ap.parse_args()
    torch.set_num_threads(1)
    for path in a.checkpoint:
        model, _cfg, task, _ = load_checkpoint(path)
        b = task.sample_batch(np.random.default_rng(0), a.n, a.length)
        with torch.no_grad():
            logits, _ = model(torch.as_tensor(b.inputs))
        last = b.mask.shape[1] - 1 - np.argmax(b.mask[:, ::-1], axis=1)
        rows = np.arange(len(last))
        pred, truth = logits[rows, last].argmax(-1).numpy(), b.targets[rows, last]
        k = task.num_classes
        conf = np.zeros((k, k), dtype=int)
        np.add.at(conf, (truth, pred), 1)
        names = [task.label_names[i] for i in range(k)]
        print(f"{path}: accuracy {(pred == truth).mean():.3f} at length {a.length} ({a.n} strings)")
        print("| true \\ answered | " + " | ".join(names) + " |")
        print("|---" * (k + 1) + "|")
        for i in range(k):
            print(f"| {names[i]} | " + " | ".join(str(v) for v in conf[i]) + " |")


if __name__ == "__main__":
    main()
