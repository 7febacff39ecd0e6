"""The Tomita 3 checkpoints of a sarrof2024-tomita sweep on the prefixes of 1 0^M.

Tomita 3 rejects a string with an odd block of 1s followed (later) by an odd block of 0s, so 1 0^m is
accepted exactly when m is even: a model that answers this at every m tracks the parity of a block,
which no non-negative diagonal SSM can do at every length (theorem SF, docs/science.md). A balanced
test set does not show it: nearly every rejected string of length >= 20 contains a short violation.

    statetrack reproduce sarrof2024-tomita --scale quick --db runs/quick.db
    python docs/results/sarrof2024-tomita-probe.py runs/quick.db

prints the accuracy of the accept/reject answer after each prefix 1 0^m, by range of m.
"""
import sys
import numpy as np
import torch
from statetrack.training.checkpoint import load_checkpoint
from statetrack.runs.store import Store
from statetrack.tasks import get_task

db = sys.argv[1]
M = 2000
store = Store(db, create=False)
dfa = get_task("tomita:3").dfa
one, zero = dfa.alphabet.index("1"), dfa.alphabet.index("0")
x = np.array([one] + [zero] * (M - 1))
q, labels = dfa.start, []
for a in x:
    q = dfa.delta[q, a]
    labels.append(int(dfa.accepting[q]))
labels = np.array(labels)          # labels[m] = label of 1 0^m
buckets = [(1, 50), (50, 500), (500, 2000)]
print("| model | training draw | " + " | ".join(f"m in [{a}, {b})" for a, b in buckets) + " |")
print("|---|---|" + "---|" * len(buckets))
for r in store.runs(study="sarrof2024-tomita"):
    if not r["task"].startswith("tomita:3") or r["status"] != "complete":
        continue
    model, cfg, task, _ = load_checkpoint(r["checkpoint"])
    with torch.no_grad():
        logits, _ = model.eval()(torch.as_tensor(x)[None])
    pred = logits[0].argmax(-1).numpy()
    cells = [f"{100 * (pred[a:b] == labels[a:b]).mean():.1f}" for a, b in buckets]
    draw = "balanced" if "balanced" in r["task"] else "uniform"
    print(f"| {r['label']} | {draw} | " + " | ".join(cells) + " |")
